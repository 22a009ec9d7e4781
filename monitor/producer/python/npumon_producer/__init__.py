"""npumon_producer: serve a torch_npu (or torch CUDA) job's caching-allocator
trace to `npumon attach <pid>`, live.

Enable it with one line in the training script::

    import npumon_producer; npumon_producer.start()

or without editing the script::

    python -m npumon_producer [--interval 0.5] train.py ARGS...
    NPUMON_PRODUCER=1 PYTHONPATH=.../python/autostart:.../python python train.py ARGS...

It turns on the allocator's memory history
(``torch_npu.npu.memory._record_memory_history`` or
``torch.cuda.memory._record_memory_history``), polls ``_snapshot()`` on a
background daemon thread, and serves npumon's live wire protocol
(docs/protocol.md) on the socket ``npumon attach <pid>`` looks for. Standard
library only; nothing it does raises into the training loop. See
docs/producer.md.

Environment (each overrides the default; start()'s arguments override them):
  NPUMON_PRODUCER_INTERVAL     poll interval, seconds or a duration ("100ms")
  NPUMON_PRODUCER_MAX_ENTRIES  ring buffer size passed to _record_memory_history
  NPUMON_PRODUCER_ADDR         unix:/path, /path, tcp:host:port or :port
  NPUMON_PRODUCER_BACKEND      npu or cuda (default: whichever torch_npu / torch is loaded)
  NPUMON_PRODUCER_QUEUE        per-client queue bound, in trace entries
  NPUMON_PRODUCER_STACKS       python (default), all, or none (no Python stacks)
  NPUMON_PRODUCER_SNDBUF       kernel send buffer per client, bytes (default: the system's)
  NPUMON_PRODUCER_MAX_CLIENTS  clients served at once (default 16; one more gets a BYE)
  NPUMON_PRODUCER_BUDGET       share of the job's wall time the producer may cost (default 0.01)
"""

import atexit
import collections
import os
import platform
import select
import socket
import stat
import sys
import threading
import time

from . import wire

__all__ = ["start", "stop", "poll", "stats", "Producer"]

DEFAULT_INTERVAL = 0.5
DEFAULT_MAX_ENTRIES = 16384
DEFAULT_QUEUE = 1 << 16
HEARTBEAT_S = 1.0
RESYNC_S = 1.0
ANCHOR = 32  # trace entries that identify where the previous poll's trace ended
MAX_FRAME_ENTRIES = 32768
MAX_CLIENTS = 16  # the Go server's MaxClients
WRITE_TIMEOUT_S = 5.0  # the Go server's WriteTimeout: a client that takes no data this long is dropped
ACCEPT_RATE = 20.0  # connections taken per second at most (burst MAX_CLIENTS): a storm waits in the backlog
DEFAULT_BUDGET = 0.01  # share of the job's wall time the producer (polls and joins) may cost

_lock = threading.Lock()
_producer = None


def _log(msg):
    try:
        sys.stderr.write("npumon_producer: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


def _duration(v):
    """Seconds from a number or a duration string (100ms, 2s, 500us)."""
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip()
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * scale
    return float(s)


def default_socket_path(pid=None):
    """The socket `npumon attach <pid>` dials: $XDG_RUNTIME_DIR/npumon/<pid>.sock,
    else <tmp>/npumon-<uid>/<pid>.sock (the rules of wire.DefaultSocketPath)."""
    pid = os.getpid() if pid is None else pid
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        d = os.path.join(xdg, "npumon")
    else:
        d = os.path.join(os.environ.get("TMPDIR") or "/tmp", "npumon-%d" % os.getuid())
    return os.path.join(d, "%d.sock" % pid)


def check_socket_dir(d, create=True):
    """The rules of wire.CheckSocketDir: the socket directory must be a
    real directory owned by this user with mode 0700, so that no other local
    user can have planted it (or a socket in it)."""
    if create:
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
    st = os.lstat(d)
    fix = "remove it or set XDG_RUNTIME_DIR"
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeError("socket directory %s is not a directory; %s" % (d, fix))
    if st.st_uid != os.getuid():
        raise RuntimeError("socket directory %s belongs to uid %d, not to this user (uid %d): refusing to use it; %s"
                           % (d, st.st_uid, os.getuid(), fix))
    if stat.S_IMODE(st.st_mode) != 0o700:
        raise RuntimeError("socket directory %s has mode %04o, want 0700: refusing to use it; chmod 700 it, %s"
                           % (d, stat.S_IMODE(st.st_mode), fix))


def prepare_socket_path(addr):
    """Make a socket path's directory ready and clear a stale socket there
    (the rules of wire.Listen): only a socket nobody accepts on is
    removed; a live one, or anything that is not a socket, is refused and
    left alone."""
    d = os.path.dirname(addr)
    if d and os.path.normpath(d) == os.path.normpath(os.path.dirname(default_socket_path())):
        check_socket_dir(d)
    elif d:
        os.makedirs(d, 0o700, exist_ok=True)
    try:
        st = os.lstat(addr)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise RuntimeError("%s exists and is not a socket; not replacing it" % addr)
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(addr)
    except ConnectionRefusedError:
        os.unlink(addr)  # stale: nobody listens
        return
    except OSError as e:
        raise RuntimeError("%s: cannot tell whether the socket is in use (%s); not replacing it" % (addr, e))
    finally:
        probe.close()
    raise RuntimeError("another producer is serving on %s" % addr)


def parse_addr(s):
    """(family, address) from an address as npumon's flags take it."""
    if not s:
        return "unix", default_socket_path()
    if s.startswith("unix:"):
        return "unix", s[5:]
    if s.startswith("tcp:"):
        s = s[4:]
    elif "/" in s:
        return "unix", s
    host, _, port = s.rpartition(":")
    return "tcp", (host or "127.0.0.1", int(port))


def _key(e):
    return (e.get("action"), e.get("addr", 0), e.get("size", 0), e.get("stream", 0), e.get("time_us"))


def _workspace_prefix(trace):
    """Number of leading entries torch_npu prepends on every _snapshot(): one
    workspace_snapshot, segment_alloc, alloc triple per workspace block."""
    i, n = 0, len(trace)
    while i + 2 < n and trace[i].get("action") == "workspace_snapshot":
        i += 3
    return i


def find_tail(anchor, trace, start=0):
    """Index in trace of the first entry newer than the previous poll's, or
    None when the previous poll's newest entries are no longer in trace (the
    ring buffer wrapped past them: entries were lost).

    anchor holds the keys of the previous trace's last entries (oldest
    first). The trace is scanned from its newest entry backwards, so the
    cost is proportional to the new entries, not to the ring size; the
    match with the fewest new entries wins."""
    n = len(trace)
    if not anchor:
        return start
    last = anchor[-1]
    k = len(anchor)
    j = n - 1
    while j >= start:
        if _key(trace[j]) == last:
            lo = j - k + 1
            ok = True
            # compare the anchor against what the ring still holds before j
            for a in range(k - 2, -1, -1):
                t = lo + a
                if t < start:
                    break
                if _key(trace[t]) != anchor[a]:
                    ok = False
                    break
            if ok:
                return j + 1
        j -= 1
    return None


def find_mark(trace, lo, active):
    """Index of the newest `snapshot` entry of size active in trace[lo:]."""
    for j in range(len(trace) - 1, lo - 1, -1):
        e = trace[j]
        if e.get("action") == "snapshot" and e.get("size") == active:
            return j
    return None


def align(anchor, trace, lo, mark, max_race=4096):
    """How many entries right before trace[mark] are newer than the previous
    trace, whose last entries' keys are anchor; None when the ring no longer
    holds any of them (it wrapped: entries were lost)."""
    k = len(anchor)
    if k == 0:
        return mark - lo
    for r in range(0, min(max_race, mark - lo) + 1):
        end = mark - r
        if end - 1 < lo:
            break
        ok = True
        for a in range(k - 1, -1, -1):
            t = end - k + a
            if t < lo:
                break
            if _key(trace[t]) != anchor[a]:
                ok = False
                break
        if ok:
            return r
    return None


class _Stacks:
    """Producer-wide stack table: frames lists to ids, ids defined once."""

    def __init__(self, enabled=True):
        self.enabled = enabled
        self.ids = {}
        self.defs = []  # (id, frames) in id order
        self.new = []

    def id_of(self, frames, cache):
        if not frames or not self.enabled:
            return 0
        k = id(frames)
        sid = cache.get(k)
        if sid is not None:
            return sid
        key = tuple((str(f.get("filename", "")), int(f.get("line", 0) or 0), str(f.get("name", ""))) for f in frames)
        sid = self.ids.get(key)
        if sid is None:
            sid = len(self.defs) + 1
            self.ids[key] = sid
            self.defs.append((sid, key))
            self.new.append((sid, key))
        cache[k] = sid
        return sid


def _block_frames(blk):
    fr = blk.get("frames")
    if fr is None:
        h = blk.get("history")
        if h:
            fr = h[0].get("frames")
    return fr


def _requested(blk):
    r = blk.get("requested_size")
    if r is None:
        h = blk.get("history")
        if h and "real_size" in h[0]:
            return int(h[0]["real_size"])
        return int(blk.get("size", 0))
    return int(r)


def encode_snapshot(b, segs, resume, stacks, cache):
    """A SNAPSHOT frame: segs (torch segment dicts, any devices), resume
    {device: seq}."""
    off = wire.begin(b, wire.SNAPSHOT)
    wire.uv(b, len(segs))
    for s in segs:
        wire.iv(b, int(s.get("device", 0)))
        addr = int(s.get("address", 0))
        wire.uv(b, addr)
        wire.iv(b, int(s.get("total_size", 0)))
        wire.uv(b, int(s.get("stream", 0)))
        pool = s.get("segment_pool_id")
        flags = (s.get("segment_type") == "large") | bool(s.get("is_expandable")) << 1 | (pool is not None) << 2
        b.append(flags)
        if pool is not None:
            wire.iv(b, int(pool[0]))
            wire.iv(b, int(pool[1]))
        wire.uv(b, stacks.id_of(s.get("frames"), cache))
        blocks = s.get("blocks") or []
        wire.uv(b, len(blocks))
        at = addr
        for blk in blocks:
            ba = blk.get("address")
            ba = at if ba is None else int(ba)
            size = int(blk.get("size", 0))
            at = ba + size
            wire.uv(b, ba)
            wire.iv(b, size)
            wire.iv(b, _requested(blk))
            b.append(wire.STATES.get(blk.get("state"), 0))
            wire.uv(b, stacks.id_of(_block_frames(blk), cache))
    wire.uv(b, len(resume))
    for d, r in sorted(resume.items()):
        wire.iv(b, d)
        wire.uv(b, r)
    wire.end(b, off)


_PREFIX_CACHE = {}


def _prefix(key):
    """Encoded action, addr, size and stream of an entry (cached: a training
    loop repeats the same few thousand)."""
    b = _PREFIX_CACHE.get(key)
    if b is None:
        act, addr, size, stream = key
        out = bytearray()
        code = wire.ACTIONS.get(act)
        if code is None:
            out.append(wire.ACTION_BY_NAME)
            wire.string(out, str(act))
        else:
            out.append(code)
        wire.uv(out, int(addr or 0))
        wire.iv(out, int(size or 0))
        wire.uv(out, int(stream or 0))
        b = bytes(out)
        if len(_PREFIX_CACHE) >= 1 << 16:
            _PREFIX_CACHE.clear()
        _PREFIX_CACHE[key] = b
    return b


def encode_entries(b, device, first, entries, stamp_us, stacks, cache, block_sizes=None):
    """ENTRIES frames for entries (torch trace dicts) numbered from first.
    Entries without time_us get stamp_us. block_sizes: {index: size}."""
    uv, iv, small = wire.uv, wire.iv, wire._SMALL
    id_of = stacks.id_of
    i0 = 0
    while i0 < len(entries):
        chunk = entries[i0:i0 + MAX_FRAME_ENTRIES]
        off = wire.begin(b, wire.ENTRIES)
        iv(b, device)
        uv(b, first + i0)
        uv(b, len(chunk))
        last = 0
        for i, e in enumerate(chunk, i0):
            get = e.get
            b += _prefix((get("action"), get("addr", 0), get("size", 0), get("stream", 0)))
            t = get("time_us")
            if t is None:
                t = stamp_us
            d = t - last
            if 0 <= d < 64:
                b += small[d << 1]
            else:
                iv(b, d)
            last = t
            sid = id_of(get("frames"), cache)
            if sid < 128:
                b += small[sid]
            else:
                uv(b, sid)
            pool = get("pool_id")
            cc = get("compile_context")
            um = get("user_metadata")
            df = get("device_free")
            bs = block_sizes.get(i, 0) if block_sizes else 0
            if pool is None and not cc and not um and not df and not bs:
                b += small[0]
                continue
            b.append((pool is not None) | bool(cc) << 1 | bool(um) << 2 | bool(df) << 3 | (bs > 0) << 4)
            if pool is not None:
                iv(b, int(pool[0]))
                iv(b, int(pool[1]))
            if cc:
                wire.string(b, cc)
            if um:
                wire.string(b, um)
            if df:
                iv(b, int(df))
            if bs > 0:
                iv(b, bs)
        wire.end(b, off)
        i0 += len(chunk)


def _block_sizes(entries, segs):
    """{index: block size} for the alloc entries whose block is still live in
    segs: the newest alloc/free event at a live block's address settles it."""
    live = {}
    for s in segs:
        at = int(s.get("address", 0))
        for blk in s.get("blocks") or []:
            ba = blk.get("address")
            ba = at if ba is None else int(ba)
            size = int(blk.get("size", 0))
            at = ba + size
            if blk.get("state") != "inactive":
                live[ba] = size
    out = {}
    if not live:
        return out
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        a = e.get("action")
        if a in ("alloc", "free_completed", "free", "free_requested"):
            addr = e.get("addr", 0)
            size = live.pop(addr, None)
            if size is not None and a == "alloc":
                out[i] = size
            elif size is not None and a == "free_requested":
                live[addr] = size  # still the same block (pending free)
            if not live:
                break
    return out


class _Dev:
    """Per-device trace bookkeeping."""

    def __init__(self, dev):
        self.dev = dev
        self.seq = 0  # number of the next entry
        self.anchor = []  # keys of the last entries of the previous trace
        self.ws = None  # keys of the workspace prefix
        self.pending = None  # (segs, active bytes) of the last poll: its snapshot entry not seen yet
        self.sealed = None  # (segs, resume): a state with the exact number of the first entry it lacks
        self.buffer = collections.deque()  # (first, count, frame bytes) published since sealed's resume
        self.buffered = 0
        self.need_resync = False
        self.unsealed_polls = 0


class _Client:
    """One client: a bounded queue drained by its own writer thread, so a
    slow reader never blocks the poll thread (docs/protocol.md, producer
    rules). Queue items are (bytes, entries); entries -1 marks the BYE."""

    def __init__(self, producer, sock, limit):
        self.p = producer
        self.sock = sock
        self.limit = limit
        self.cv = threading.Condition()
        self.q = collections.deque()
        self.qn = 0
        self.lagging = False
        self.drop_from = {}  # device -> first sequence number not delivered
        self.dropped = 0
        self.last_resync = 0.0
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="npumon-producer-client", daemon=True)

    def push(self, data, entries=0, device=None, first=0, droppable=True):
        with self.cv:
            if self.closed:
                return
            if entries > 0 and self.lagging:
                self.dropped += entries
                return
            if entries > 0 and self.qn > 0 and self.qn + entries > self.limit:
                # (a batch bigger than the bound still enters an empty queue:
                # a client that keeps up is never starved by one big poll)
                self.lagging = True
                self.drop_from.setdefault(device, first)
                self.dropped += entries
                self.cv.notify()
                return
            if entries == 0 and self.lagging and droppable:
                return  # a resync follows; GAPs and SNAPSHOTs before it are moot
            self.q.append((data, entries))
            if entries > 0:
                self.qn += entries
            self.cv.notify()

    def close(self):
        with self.cv:
            self.closed = True
            self.cv.notify()

    def _run(self):
        sock = self.sock
        try:
            # sendall's timeout bounds the whole write (Python >= 3.5)
            sock.settimeout(self.p.write_timeout)
            while True:
                with self.cv:
                    while not self.q and not self.closed and not (self.lagging and self._may_resync()):
                        self.cv.wait(0.25)
                    items = list(self.q)
                    self.q.clear()
                    self.qn = 0
                    lagging, closed = self.lagging, self.closed
                bye = [d for d, n in items if n < 0]
                data = b"".join(d for d, n in items if n >= 0)
                if data:
                    sock.sendall(data)
                if lagging and (bye or closed or self._may_resync()):
                    sock.sendall(self.p._resync(self))
                if bye:
                    sock.sendall(b"".join(bye))
                    return
                if closed and not items:
                    return
        except socket.timeout:
            self.p.stalled += 1
            self.p._error("client", RuntimeError("disconnected: it took no data for %gs" % self.p.write_timeout))
        except Exception:
            pass
        finally:
            self.p._drop_client(self)
            try:
                sock.close()
            except Exception:
                pass

    def _may_resync(self):
        return time.monotonic() - self.last_resync >= RESYNC_S


class Producer:
    """One process's producer. Use start() / stop(); the methods never raise."""

    def __init__(self, interval=None, max_entries=None, address=None, backend=None, record=True,
                 queue_entries=None, stacks=None, max_clients=None, budget=None):
        env = os.environ.get
        self.interval = _duration(interval if interval is not None else env("NPUMON_PRODUCER_INTERVAL", DEFAULT_INTERVAL))
        if self.interval <= 0:
            self.interval = DEFAULT_INTERVAL
        self.max_entries = int(max_entries if max_entries is not None else env("NPUMON_PRODUCER_MAX_ENTRIES", DEFAULT_MAX_ENTRIES))
        self.address = address if address is not None else env("NPUMON_PRODUCER_ADDR", "")
        self.backend = backend or env("NPUMON_PRODUCER_BACKEND", "")
        self.record = record
        self.queue = int(queue_entries if queue_entries is not None else env("NPUMON_PRODUCER_QUEUE", DEFAULT_QUEUE))
        self.stack_mode = stacks or env("NPUMON_PRODUCER_STACKS", "python")
        self.max_clients = int(max_clients if max_clients is not None else env("NPUMON_PRODUCER_MAX_CLIENTS", MAX_CLIENTS))
        if self.max_clients <= 0:
            self.max_clients = MAX_CLIENTS
        self.budget = float(budget if budget is not None else env("NPUMON_PRODUCER_BUDGET", DEFAULT_BUDGET))
        if not 0 < self.budget <= 1:
            self.budget = DEFAULT_BUDGET
        self.write_timeout = WRITE_TIMEOUT_S
        self.accept_rate = ACCEPT_RATE
        self.pid = os.getpid()
        self.start_us = int(time.time() * 1e6)
        self._mu = threading.RLock()
        self._stacks = _Stacks(self.stack_mode != "none")
        self._devs = {}
        self._used = set()  # devices the job has memory on: the only ones asked for HBM figures
        self._clients = []
        self._mem = None
        self._npu = None  # the device module (torch_npu.npu or torch.cuda) once found
        self._time_base = wire.TIME_POLL_US
        self._devinfo = []
        self._settings = None
        self._listener = None
        self._path = None
        self._stop = threading.Event()
        self._thread = None
        self._serving = threading.Event()
        self._failures = 0
        self._forked = False
        self.polls = 0
        self.poll_s = 0.0  # time spent in _snapshot()
        self.work_s = 0.0  # time spent on everything else of a poll
        self.published = 0
        self.overflows = 0
        self.errors = 0
        self.refused = 0  # connections refused over max_clients
        self.stalled = 0  # clients dropped for taking no data within write_timeout
        self.state_encodes = 0  # joining-client states encoded (at most one per poll: shared)
        self._state_cache = None  # (bytes, entries) of the state since the last poll
        self.cost_s = 0.0  # the producer's time on the job's side: polls, _snapshot() and state encodes
        self._cost_mark = 0.0  # cost_s at the end of the last wait
        self.cur_interval = self.interval  # the interval stretched to stay within budget
        self._since = time.monotonic()

    # ---- lifecycle ----

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="npumon-producer", daemon=True)
        self._thread.start()

    def stop(self, timeout=2.0):
        if self._forked:
            return
        if self._stop.is_set():
            return
        try:
            if self._serving.is_set():
                with self._mu:
                    try:
                        self._poll_locked()
                    except Exception as e:
                        self._error("final poll", e)
        finally:
            self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._shutdown(timeout)

    def _shutdown(self, timeout):
        with self._mu:
            clients = list(self._clients)
            b = bytearray()
            wire.bye(b, "producer exiting")
            for c in clients:
                c.push(bytes(b), -1, droppable=False)
                c.close()
            ln, self._listener = self._listener, None
            path, self._path = self._path, None
        # the path goes as listening stops, not after the clients' writers
        # are done: by then a restarted producer may serve there
        if path:
            try:
                os.unlink(path)
            except OSError:
                pass
        if ln is not None:
            try:
                ln.close()
            except Exception:
                pass
        deadline = time.monotonic() + timeout
        for c in clients:
            c.thread.join(max(0.0, deadline - time.monotonic()))
            try:
                c.sock.close()
            except Exception:
                pass

    def _error(self, what, e):
        self.errors += 1
        if self.errors <= 5:
            _log("%s: %s: %s" % (what, type(e).__name__, e))

    # ---- backend ----

    def _find_backend(self):
        """The memory module once the job's torch_npu / torch device is
        initialised (the producer never initialises a device itself)."""
        want = self.backend
        if want in ("", "npu"):
            tn = sys.modules.get("torch_npu")
            if tn is not None:
                # the job may still be importing it: wait for is_initialized
                npu = getattr(tn, "npu", None)
                init = getattr(npu, "is_initialized", None)
                if init is not None and init():
                    import torch_npu.npu.memory as mem  # noqa: F401
                    self._time_base = wire.TIME_POLL_US
                    self._conf_key = "PYTORCH_NPU_ALLOC_CONF"
                    self._npu = npu
                    return sys.modules["torch_npu.npu.memory"]
        if want in ("", "cuda"):
            t = sys.modules.get("torch")
            cuda = getattr(t, "cuda", None) if t is not None else None
            if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
                import torch.cuda.memory as mem  # noqa: F401
                # torch >= 2.2 records time_us itself
                ver = str(getattr(t, "__version__", "0.0")).split(".")
                try:
                    new = (int(ver[0]), int(ver[1].split("+")[0])) >= (2, 2)
                except (ValueError, IndexError):
                    new = False
                self._time_base = wire.TIME_EPOCH_US if new else wire.TIME_POLL_US
                self._conf_key = "PYTORCH_CUDA_ALLOC_CONF"
                self._npu = cuda
                return sys.modules["torch.cuda.memory"]
        return None

    def _enable(self):
        if not self.record:
            return
        stacks = "python" if self.stack_mode in ("python", "none") else "all"
        context = None if self.stack_mode == "none" else "all"
        self._mem._record_memory_history(enabled="all", context=context, stacks=stacks, max_entries=self.max_entries)

    def _devices(self, devs):
        out = []
        mod = self._npu
        for d in sorted(devs):
            name, total, used = "", 0, 0
            try:
                name = str(mod.get_device_name(d))
            except Exception:
                pass
            try:
                free, total = mod.mem_get_info(d)
                used = total - free
            except Exception:
                pass
            out.append((d, name, int(total), int(used), 0))
        return out

    # ---- the poll thread ----

    def _loop(self):
        try:
            while not self._stop.is_set():
                try:
                    self._mem = self._find_backend()
                except Exception as e:
                    self._error("backend", e)
                    return
                if self._mem is not None:
                    break
                self._stop.wait(min(self.interval, 0.05))
            if self._stop.is_set():
                return
            ln = self._bind()  # before recording anything: another producer may be serving there
            self._enable()
            with self._mu:
                self._poll_locked()  # the first state and where its trace ends
                self._poll_locked()  # seals it: finds its snapshot entry
                # only devices the job uses: asking another one would create a context on it
                self._devinfo = self._devices(self._used)
            threading.Thread(target=self._accept, args=(ln,), name="npumon-producer-accept", daemon=True).start()
            self._serving.set()
            last_hb = time.monotonic()
            self._since = time.monotonic()
            self._cost_mark = self.cost_s  # the first state's cost is paid once: it stretches nothing
            while not self._stop.wait(self._next_wait()):
                try:
                    with self._mu:
                        if self._stop.is_set():
                            break
                        self._poll_locked()
                    self._failures = 0
                except Exception as e:
                    self._failures += 1
                    self._error("poll", e)
                    if self._failures >= 10:
                        _log("giving up after 10 failed polls")
                        break
                if time.monotonic() - last_hb >= HEARTBEAT_S:
                    last_hb = time.monotonic()
                    self._heartbeat()
        except Exception as e:
            self._error("producer thread", e)

    def _next_wait(self):
        """The wait before the next poll: the interval, stretched so that
        what the producer cost since the last wait (polls, _snapshot(),
        joining clients' states) is at most budget of the time it covers."""
        spent = self.cost_s - self._cost_mark
        self._cost_mark = self.cost_s
        wait = max(self.interval, spent / self.budget - spent)
        self.cur_interval = wait
        return wait

    def poll(self):
        """Poll now (from any thread); False when not serving yet."""
        if not self._serving.is_set() or self._stop.is_set():
            return False
        try:
            with self._mu:
                self._poll_locked()
            return True
        except Exception as e:
            self._error("poll", e)
            return False

    def _poll_locked(self):
        t0 = time.perf_counter()
        stamp = int(time.time() * 1e6)
        snap = self._mem._snapshot()
        t1 = time.perf_counter()
        if isinstance(snap, list):  # memory_snapshot() form: no traces
            snap = {"segments": snap, "device_traces": []}
        segs = snap.get("segments") or []
        traces = snap.get("device_traces") or []
        if self._settings is None and isinstance(snap.get("allocator_settings"), dict):
            self._settings = dict(snap["allocator_settings"], conf_key=self._conf_key)
        by_dev = {}
        for s in segs:
            by_dev.setdefault(int(s.get("device", 0)), []).append(s)
        devs = set(by_dev)
        self._used |= devs
        for d, t in enumerate(traces):
            if t:
                devs.add(d)
        cache = {}
        for d in sorted(devs | set(self._devs)):
            trace = traces[d] if d < len(traces) else []
            self._poll_dev(d, trace, by_dev.get(d, []), stamp, cache)
        self.polls += 1
        self._state_cache = None  # the state may have moved: the next joiner encodes it once
        t2 = time.perf_counter()
        self.poll_s += t1 - t0
        self.work_s += t2 - t1
        self.cost_s += t2 - t0
        return snap

    def _broadcast(self, data, entries=0, device=None, first=0, droppable=True):
        for c in self._clients:
            c.push(data, entries, device, first, droppable)

    def _stacks_frame(self):
        if not self._stacks.new:
            return
        b = bytearray()
        wire.stacks(b, self._stacks.new)
        self._stacks.new = []
        self._broadcast(bytes(b), droppable=False)

    def _publish(self, dev, entries, stamp, cache, segs):
        if not entries:
            return
        sizes = _block_sizes(entries, segs) if segs else None
        b = bytearray()
        encode_entries(b, dev.dev, dev.seq, entries, stamp, self._stacks, cache, sizes)
        self._stacks_frame()
        data = bytes(b)
        first = dev.seq
        dev.seq += len(entries)
        self.published += len(entries)
        self._broadcast(data, len(entries), dev.dev, first)
        self._state_cache = None
        dev.buffer.append((first, len(entries), data))
        dev.buffered += len(entries)

    def _seal(self, dev, segs, resume):
        self._state_cache = None
        dev.sealed = (segs, resume)
        while dev.buffer and dev.buffer[0][0] < resume:
            _, n, _ = dev.buffer.popleft()
            dev.buffered -= n
        dev.unsealed_polls = 0

    def _resync_frame(self, dev, cache):
        segs, resume = dev.sealed
        b = bytearray()
        encode_snapshot(b, segs, {dev.dev: resume}, self._stacks, cache)
        self._stacks_frame()
        self._broadcast(bytes(b))

    def _poll_dev(self, d, trace, segs, stamp, cache):
        dev = self._devs.get(d)
        first_poll = dev is None
        if first_poll:
            dev = self._devs[d] = _Dev(d)
        ws = _workspace_prefix(trace)
        wskeys = [_key(e) for e in trace[:ws]]
        if dev.ws is not None and wskeys != dev.ws:
            dev.need_resync = True  # torch_npu's workspace changed: not in the trace
        dev.ws = wskeys
        active = 0
        for s in segs:
            active += int(s.get("active_size", 0))
        n = len(trace)
        anchor = dev.anchor
        dev.anchor = [_key(e) for e in trace[max(ws, n - ANCHOR):]]
        pending, dev.pending = dev.pending, (segs, active)
        if first_poll:
            # entries before the first snapshot are in its state: not published
            if n == ws:
                self._seal(dev, segs, 0)
            return
        # The last poll's own `snapshot` entry, recorded right after its
        # segments under the allocator's lock: that state reflects exactly
        # the entries before it. Newer entries follow it; entries recorded
        # between the last poll's trace and its segments precede it.
        mark = find_mark(trace, ws, pending[1]) if pending is not None else None
        if mark is not None:
            race = align(anchor, trace, ws, mark)
            if race is None:
                # the ring wrapped past the last poll's entries: an unknown number is lost
                self._overflow(dev)
                start = ws
            else:
                start = mark - race
            self._publish(dev, trace[start:mark], stamp, cache, None)
            self._seal(dev, pending[0], dev.seq)
            if dev.need_resync:
                self._resync_frame(dev, cache)
                dev.need_resync = False
            self._publish(dev, trace[mark:], stamp, cache, segs)
            return
        if n - ws >= self.max_entries > 0 or (anchor and n > ws and find_tail(anchor, trace, ws) is None):
            # a full ring without the last poll's snapshot entry: it wrapped
            # past it. The newest state, exact up to entries racing the
            # snapshot call, repairs the clients at once.
            self._overflow(dev)
            self._publish(dev, trace[ws:], stamp, cache, segs)
            self._seal(dev, segs, dev.seq)
            self._resync_frame(dev, cache)
            dev.need_resync = False
            return
        # no snapshot entries (history switched off, or state only): follow
        # the ring by its last entries, and serve the newest state, exact up
        # to entries racing the snapshot call
        start = find_tail(anchor, trace, ws) if anchor else ws
        self._publish(dev, trace[start:], stamp, cache, segs)
        self._seal(dev, segs, dev.seq)
        if dev.need_resync:
            self._resync_frame(dev, cache)
            dev.need_resync = False

    def _overflow(self, dev):
        self.overflows += 1
        b = bytearray()
        wire.gap(b, dev.dev, 0, dev.seq)
        self._broadcast(bytes(b))
        dev.need_resync = True

    def _heartbeat(self):
        try:
            with self._mu:
                if not self._clients:
                    return
                devs = self._devices(self._used) if self._devinfo else []
                b = bytearray()
                wire.heartbeat(b, int(time.time() * 1e6), devs)
                self._broadcast(bytes(b), droppable=False)
        except Exception as e:
            self._error("heartbeat", e)

    # ---- serving ----

    def _bind(self):
        """The listening socket (clients wait in its backlog until the first
        state is ready)."""
        fam, addr = parse_addr(self.address)
        if fam == "unix":
            prepare_socket_path(addr)
            ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            ln.bind(addr)
            os.chmod(addr, 0o600)
            self._path = addr
        else:
            ln = socket.socket(socket.AF_INET6 if ":" in addr[0] else socket.AF_INET, socket.SOCK_STREAM)
            ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ln.bind(addr)
        ln.listen(16)
        self._listener = ln
        return ln

    def _accept(self, ln):
        threading.Thread(target=self._watch, name="npumon-producer-watch", daemon=True).start()
        full = bytearray()
        wire.bye(full, "too many clients (%d); try again later" % self.max_clients)
        full = bytes(full)
        tokens, last = float(self.max_clients), time.monotonic()
        while not self._stop.is_set():
            # a token bucket: a connection storm waits in the listen backlog
            # (then is refused by the kernel), it does not take the job's time
            now = time.monotonic()
            tokens = min(float(self.max_clients), tokens + (now - last) * self.accept_rate)
            last = now
            if tokens < 1:
                time.sleep((1 - tokens) / self.accept_rate)
                continue
            try:
                conn, _ = ln.accept()
            except Exception:
                if self._stop.is_set() or self._listener is None:
                    return
                time.sleep(0.05)
                continue
            tokens -= 1
            if len(self._clients) >= self.max_clients:
                self.refused += 1
                try:
                    conn.setblocking(False)
                    conn.send(full)  # best effort: it fits any empty send buffer
                except Exception:
                    pass
                try:
                    conn.close()
                except Exception:
                    pass
                continue
            try:
                self._join(conn)
            except Exception as e:
                self._error("client", e)
                try:
                    conn.close()
                except Exception:
                    pass

    def _hello(self):
        b = bytearray()
        # the resolution is the interval as the budget has stretched it
        clock = "poll:%dus" % int(round(self.cur_interval * 1e6)) if self._time_base == wire.TIME_POLL_US else "realtime"
        wire.hello(b, self.pid, platform.node(), self.start_us, int(time.time() * 1e6), clock, self._time_base,
                   self._devinfo, self._settings)
        return b

    def _state(self, b, cache):
        """STACKS, SNAPSHOT and the entries since it, for a joining client:
        encoded once per poll and shared by every client that joins (or
        resyncs) before the next, so a reconnect storm costs the job one
        encoding per poll, not one per connection."""
        if self._state_cache is None:
            t0 = time.perf_counter()
            sb = bytearray()
            n = self._encode_state(sb, cache)
            self._state_cache = (bytes(sb), n)
            self.state_encodes += 1
            self.cost_s += time.perf_counter() - t0
        data, n = self._state_cache
        b += data
        return n

    def _encode_state(self, b, cache):
        segs, resume = [], {}
        for d in sorted(self._devs):
            dev = self._devs[d]
            if dev.sealed is not None:
                segs.extend(dev.sealed[0])
                resume[d] = dev.sealed[1]
        snap = bytearray()
        encode_snapshot(snap, segs, resume, self._stacks, cache)
        self._stacks.new = []  # the joining client gets every definition below; others at the next publish
        if self._stacks.defs:
            wire.stacks(b, self._stacks.defs)
        b += snap
        n = 0
        for d in sorted(self._devs):
            for _, cnt, data in self._devs[d].buffer:
                b += data
                n += cnt
        return n

    def _join(self, conn):
        sndbuf = int(os.environ.get("NPUMON_PRODUCER_SNDBUF", "0") or 0)
        if sndbuf > 0:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        c = _Client(self, conn, self.queue)
        with self._mu:
            if self._listener is None:  # shut down while this one was accepted: nothing to serve
                conn.close()
                return
            b = self._hello()
            self._state(b, {})
            c.q.append((bytes(b), 0))
            # started before anyone can see it: _shutdown joins the writers of
            # the clients it finds, so that the job does not exit (killing the
            # daemon threads) before they have sent what they hold and BYE
            c.thread.start()
            self._clients.append(c)

    def _watch(self):
        """One thread for every client (threads stay bounded): a client
        never sends anything, so bytes or EOF end its session."""
        while not self._stop.is_set():
            clients = [c for c in list(self._clients) if not c.closed]
            if not clients:
                self._stop.wait(0.1)
                continue
            try:
                # poll, not select: a job's descriptors may be past FD_SETSIZE
                pl = select.poll()
                by_fd = {}
                for c in clients:
                    fd = c.sock.fileno()
                    if fd >= 0:
                        by_fd[fd] = c
                        pl.register(fd, select.POLLIN)
                ready = pl.poll(100)
            except (OSError, ValueError):  # a socket closed under us: look again
                self._stop.wait(0.01)
                continue
            for fd, _ in ready:
                c = by_fd.get(fd)
                if c is not None:
                    c.close()
                    try:
                        c.sock.shutdown(socket.SHUT_RDWR)
                    except Exception:
                        pass

    def _drop_client(self, c):
        with self._mu:
            if c in self._clients:
                self._clients.remove(c)

    def _resync(self, c):
        """The bytes that repair a client that fell behind: a GAP for what it
        missed, a fresh SNAPSHOT and the entries since."""
        with self._mu:
            b = bytearray()
            for d, first in sorted(c.drop_from.items()):
                dev = self._devs.get(d)
                if dev is not None and dev.sealed is not None and dev.sealed[1] > first:
                    wire.gap(b, d, dev.sealed[1] - first, dev.sealed[1])
            self._state(b, {})
            with c.cv:
                c.lagging = False
                c.drop_from = {}
                c.last_resync = time.monotonic()
            return bytes(b)

    def stats(self):
        wall = max(time.monotonic() - self._since, 1e-9)
        return {"polls": self.polls, "snapshot_s": self.poll_s, "work_s": self.work_s, "published": self.published,
                "overflows": self.overflows, "clients": len(self._clients), "errors": self.errors,
                "serving": self._serving.is_set(), "socket": self._path,
                "refused": self.refused, "stalled": self.stalled, "state_encodes": self.state_encodes,
                "budget": self.budget, "cost_s": self.cost_s, "cost_share": self.cost_s / wall,
                "interval_s": self.cur_interval}


def start(interval=None, max_entries=None, address=None, backend=None, record=True, queue_entries=None, stacks=None,
          max_clients=None, budget=None):
    """Start serving this process's allocator trace; returns the Producer, or
    None when it could not start (the reason goes to stderr). Never raises.
    The first call wins; later calls return the running producer."""
    global _producer
    try:
        with _lock:
            if _producer is not None:
                return _producer
            p = Producer(interval, max_entries, address, backend, record, queue_entries, stacks, max_clients, budget)
            p.start()
            _producer = p
            atexit.register(stop)
            return p
    except Exception as e:
        _log("not started: %s: %s" % (type(e).__name__, e))
        return None


def stop(timeout=2.0):
    """Take a last poll, say BYE to clients, remove the socket. Never raises."""
    global _producer
    try:
        with _lock:
            p, _producer = _producer, None
        if p is not None:
            p.stop(timeout)
    except Exception as e:
        _log("stop: %s: %s" % (type(e).__name__, e))


def poll():
    """Poll the allocator now instead of waiting for the interval."""
    p = _producer
    return p.poll() if p is not None else False


def stats():
    """Counters of the running producer (empty when none)."""
    p = _producer
    try:
        return p.stats() if p is not None else {}
    except Exception:
        return {}


def _after_fork():
    # a forked child (a DataLoader worker) has no producer threads and must
    # not remove the parent's socket at exit
    global _producer
    p = _producer
    if p is not None:
        p._forked = True
    _producer = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
