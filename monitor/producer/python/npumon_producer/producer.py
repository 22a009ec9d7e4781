"""The torch glue: find the job's torch_npu / torch device once it is
initialised, turn on the allocator's memory history, poll ``_snapshot()``
on a background thread and turn what changed into frames for the server.

Calls into torch go through ``_torch()``: whatever torch raises becomes a
TorchError, counted and logged by the caller, never raised into the job.
"""

from __future__ import annotations

import collections
import os
import platform
import sys
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Set, Tuple, Type, TypeVar, Union

from . import wire
from .addr import AddressError, SocketRefused, default_socket_path
from .encode import StackCache, Stacks, encode_entries, encode_snapshot
from .report import DATA_ERRORS, Report, TorchError, log
from .server import ACCEPT_RATE, MAX_CLIENTS, Server
from .tail import ANCHOR, Key, align, block_sizes, find_mark, find_tail, key, workspace_prefix

__all__ = ["Producer", "DEFAULT_INTERVAL", "DEFAULT_MAX_ENTRIES", "DEFAULT_QUEUE", "DEFAULT_BUDGET", "HEARTBEAT_S",
           "duration"]

DEFAULT_INTERVAL = 0.5
DEFAULT_MAX_ENTRIES = 16384
DEFAULT_QUEUE = 1 << 16
DEFAULT_BUDGET = 0.01  # share of the job's wall time the producer (polls and joins) may cost
HEARTBEAT_S = 1.0
MAX_FAILED_POLLS = 10

Segment = Mapping[str, Any]  # a segment dict of _snapshot()
Entry = Mapping[str, Any]  # a trace entry dict of _snapshot()
T = TypeVar("T")

# What a poll can raise: torch's errors, a snapshot dict not shaped as expected.
POLL_ERRORS: Tuple[Type[BaseException], ...] = (TorchError,) + DATA_ERRORS


def duration(v: Union[str, int, float]) -> float:
    """Seconds from a number or a duration string (100ms, 2s, 500us).
    ValueError when it is neither."""
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip()
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("µs", 1e-6), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if s.endswith(suffix):
            return float(s[: -len(suffix)]) * scale
    return float(s)


def _torch(what: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """Call into torch / torch_npu. Its exceptions are its own (RuntimeError
    and subclasses from C++, ImportError, whatever a version raises), so
    this one place catches them all and names the call."""
    try:
        return fn(*args, **kw)
    except Exception as e:  # the boundary with torch: anything it raises is reported, never passed to the job
        raise TorchError("%s: %s: %s" % (what, type(e).__name__, e)) from e


class _Dev:
    """Per-device trace bookkeeping."""

    def __init__(self, dev: int) -> None:
        self.dev = dev
        self.seq = 0  # number of the next entry
        self.anchor: List[Key] = []  # keys of the last entries of the previous trace
        self.ws: Optional[List[Key]] = None  # keys of the workspace prefix
        # (segs, active bytes) of the last poll: its snapshot entry not seen yet
        self.pending: Optional[Tuple[List[Segment], int]] = None
        # (segs, resume): a state with the exact number of the first entry it lacks
        self.sealed: Optional[Tuple[List[Segment], int]] = None
        self.buffer: Deque[Tuple[int, int, bytes]] = collections.deque()  # (first, count, frame) since resume
        self.buffered = 0
        self.need_resync = False


def _env_num(conv: Callable[[str], T], arg: Optional[Any], name: str, default: T) -> T:
    if arg is not None:
        return conv(arg)
    v = os.environ.get(name, "")
    if v == "":
        return default
    try:
        return conv(v)
    except ValueError as e:
        raise ValueError("%s=%s: %s" % (name, v, e)) from None


class Producer:
    """One process's producer. Use start() / stop(); the methods never raise
    (construction does, for a bad argument or environment variable)."""

    def __init__(self, interval: Optional[Union[str, float]] = None, max_entries: Optional[int] = None,
                 address: Optional[str] = None, backend: Optional[str] = None, record: bool = True,
                 queue_entries: Optional[int] = None, stacks: Optional[str] = None, max_clients: Optional[int] = None,
                 budget: Optional[float] = None) -> None:
        env = os.environ.get
        self.interval = _env_num(duration, interval, "NPUMON_PRODUCER_INTERVAL", DEFAULT_INTERVAL)
        if self.interval <= 0:
            self.interval = DEFAULT_INTERVAL
        self.max_entries = _env_num(int, max_entries, "NPUMON_PRODUCER_MAX_ENTRIES", DEFAULT_MAX_ENTRIES)
        self.address = address if address is not None else env("NPUMON_PRODUCER_ADDR", "")
        self.backend = backend or env("NPUMON_PRODUCER_BACKEND", "")
        if self.backend not in ("", "npu", "cuda"):
            raise ValueError("backend %r: want npu or cuda" % self.backend)
        self.record = record
        self.queue = _env_num(int, queue_entries, "NPUMON_PRODUCER_QUEUE", DEFAULT_QUEUE)
        self.stack_mode = stacks or env("NPUMON_PRODUCER_STACKS", "python")
        if self.stack_mode not in ("python", "all", "none"):
            raise ValueError("stacks %r: want python, all or none" % self.stack_mode)
        self.max_clients = _env_num(int, max_clients, "NPUMON_PRODUCER_MAX_CLIENTS", MAX_CLIENTS)
        if self.max_clients <= 0:
            self.max_clients = MAX_CLIENTS
        self.budget = _env_num(float, budget, "NPUMON_PRODUCER_BUDGET", DEFAULT_BUDGET)
        if not 0 < self.budget <= 1:
            self.budget = DEFAULT_BUDGET
        sndbuf = _env_num(int, None, "NPUMON_PRODUCER_SNDBUF", 0)
        self.pid = os.getpid()
        self.start_us = int(time.time() * 1e6)
        self.mu = threading.RLock()
        self.report = Report()
        self._stop = threading.Event()
        self.server = Server(self, self.address, self._stop, self.report, self.max_clients, self.queue, sndbuf)
        self.server.accept_rate = ACCEPT_RATE
        self._stacks = Stacks(self.stack_mode != "none")
        self._devs: Dict[int, _Dev] = {}
        self._used: Set[int] = set()  # devices the job has memory on: the only ones asked for HBM figures
        self._mem: Any = None  # torch_npu.npu.memory or torch.cuda.memory once found
        self._npu: Any = None  # the device module (torch_npu.npu or torch.cuda) once found
        self._conf_key = "PYTORCH_NPU_ALLOC_CONF"
        self._time_base = wire.TIME_POLL_US
        self._devinfo: List[wire.Device] = []
        self._settings: Optional[Dict[str, Any]] = None
        self._thread: Optional[threading.Thread] = None
        self._serving = threading.Event()
        self._failures = 0
        self._forked = False
        self.polls = 0
        self.poll_s = 0.0  # time spent in _snapshot()
        self.work_s = 0.0  # time spent on everything else of a poll
        self.published = 0
        self.overflows = 0
        self.state_encodes = 0  # joining-client states encoded (at most one per poll: shared)
        self._state_cache: Optional[Tuple[bytes, int]] = None  # (bytes, entries) of the state since the last poll
        self.cost_s = 0.0  # the producer's time on the job's side: polls, _snapshot() and state encodes
        self._cost_mark = 0.0  # cost_s at the end of the last wait
        self.cur_interval = self.interval  # the interval stretched to stay within budget
        self._since = time.monotonic()

    @property
    def errors(self) -> int:
        return self.report.errors

    # ---- lifecycle ----

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="npumon-producer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        if self._forked:
            return
        if self._stop.is_set():
            return
        try:
            if self._serving.is_set():
                with self.mu:
                    try:
                        self._poll_locked()
                    except POLL_ERRORS as e:
                        self.report.error("final poll", e)
        finally:
            self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.server.shutdown(timeout)

    # ---- backend ----

    def _find_backend(self) -> Any:
        """The memory module once the job's torch_npu / torch device is
        initialised (the producer never initialises a device itself), else
        None. Raises TorchError."""
        want = self.backend
        if want in ("", "npu"):
            tn = sys.modules.get("torch_npu")
            if tn is not None:
                # the job may still be importing it: wait for is_initialized
                npu = getattr(tn, "npu", None)
                init = getattr(npu, "is_initialized", None)
                if init is not None and _torch("torch_npu.npu.is_initialized", init):
                    mem = _torch("import torch_npu.npu.memory", __import__, "torch_npu.npu.memory")
                    del mem
                    self._time_base = wire.TIME_POLL_US
                    self._conf_key = "PYTORCH_NPU_ALLOC_CONF"
                    self._npu = npu
                    return sys.modules["torch_npu.npu.memory"]
        if want in ("", "cuda"):
            t = sys.modules.get("torch")
            cuda = getattr(t, "cuda", None) if t is not None else None
            init = getattr(cuda, "is_initialized", None)
            if init is not None and _torch("torch.cuda.is_initialized", init):
                mem = _torch("import torch.cuda.memory", __import__, "torch.cuda.memory")
                del mem
                # torch >= 2.2 records time_us itself
                ver = str(getattr(t, "__version__", "0.0")).split(".")
                try:
                    new = (int(ver[0]), int(ver[1].split("+")[0])) >= (2, 2)
                except (ValueError, IndexError):
                    new = False  # a version we cannot read: stamp entries with poll times, which is always right
                self._time_base = wire.TIME_EPOCH_US if new else wire.TIME_POLL_US
                self._conf_key = "PYTORCH_CUDA_ALLOC_CONF"
                self._npu = cuda
                return sys.modules["torch.cuda.memory"]
        return None

    def _enable(self) -> None:
        if not self.record:
            return
        stacks = "python" if self.stack_mode in ("python", "none") else "all"
        context = None if self.stack_mode == "none" else "all"
        _torch("_record_memory_history", self._mem._record_memory_history,
               enabled="all", context=context, stacks=stacks, max_entries=self.max_entries)

    def _devices(self, devs: Set[int]) -> List[wire.Device]:
        out: List[wire.Device] = []
        mod = self._npu
        if mod is None:  # a memory module handed in without its device module (tests, benchmarks): no figures
            return [(d, "", 0, 0, 0) for d in sorted(devs)]
        for d in sorted(devs):
            name, total, used = "", 0, 0
            try:
                name = str(_torch("get_device_name", mod.get_device_name, d))
            except (TorchError, AttributeError) as e:
                self.report.skip("device name", e)  # the HELLO goes without it
            try:
                free, total = _torch("mem_get_info", mod.mem_get_info, d)
                used = total - free
            except (TorchError, AttributeError, TypeError, ValueError) as e:
                self.report.skip("device memory", e)  # HBM figures go as 0 (unknown)
                total = used = 0
            out.append((d, name, int(total), int(used), 0))
        return out

    # ---- the poll thread ----

    def _loop(self) -> None:
        try:
            self._run()
        except Exception as e:  # the poll thread's top: a bug here ends the producer, never the job
            self.report.error("producer thread", e)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._mem = self._find_backend()
            except TorchError as e:
                self.report.error("backend", e)
                return
            if self._mem is not None:
                break
            self._stop.wait(min(self.interval, 0.05))
        if self._stop.is_set():
            return
        try:
            ln = self.server.bind()  # before recording anything: another producer may be serving there
        except (OSError, AddressError, SocketRefused) as e:
            self.report.error("listen %s" % (self.address or default_socket_path()), e)
            return
        try:
            self._enable()
            with self.mu:
                self._poll_locked()  # the first state and where its trace ends
                self._poll_locked()  # seals it: finds its snapshot entry
                # only devices the job uses: asking another one would create a context on it
                self._devinfo = self._devices(self._used)
        except POLL_ERRORS as e:
            self.report.error("first poll", e)
            self.server.shutdown(0)
            return
        self.server.serve(ln)
        self._serving.set()
        last_hb = time.monotonic()
        self._since = time.monotonic()
        self._cost_mark = self.cost_s  # the first state's cost is paid once: it stretches nothing
        while not self._stop.wait(self._next_wait()):
            try:
                with self.mu:
                    if self._stop.is_set():
                        break
                    self._poll_locked()
                self._failures = 0
            except POLL_ERRORS as e:
                self._failures += 1
                self.report.error("poll", e)
                if self._failures >= MAX_FAILED_POLLS:
                    log("giving up after %d failed polls" % MAX_FAILED_POLLS)
                    break
            if time.monotonic() - last_hb >= HEARTBEAT_S:
                last_hb = time.monotonic()
                self._heartbeat()

    def _next_wait(self) -> float:
        """The wait before the next poll: the interval, stretched so that
        what the producer cost since the last wait (polls, _snapshot(),
        joining clients' states) is at most budget of the time it covers."""
        spent = self.cost_s - self._cost_mark
        self._cost_mark = self.cost_s
        wait = max(self.interval, spent / self.budget - spent)
        self.cur_interval = wait
        return wait

    def poll(self) -> bool:
        """Poll now (from any thread); False when not serving yet or it failed."""
        if not self._serving.is_set() or self._stop.is_set():
            return False
        try:
            with self.mu:
                self._poll_locked()
            return True
        except POLL_ERRORS as e:
            self.report.error("poll", e)
            return False

    def _poll_locked(self) -> Any:
        t0 = time.perf_counter()
        stamp = int(time.time() * 1e6)
        snap = _torch("_snapshot", self._mem._snapshot)
        t1 = time.perf_counter()
        if isinstance(snap, list):  # memory_snapshot() form: no traces
            snap = {"segments": snap, "device_traces": []}
        segs: List[Segment] = snap.get("segments") or []
        traces: List[List[Entry]] = snap.get("device_traces") or []
        if self._settings is None and isinstance(snap.get("allocator_settings"), dict):
            self._settings = dict(snap["allocator_settings"], conf_key=self._conf_key)
        by_dev: Dict[int, List[Segment]] = {}
        for s in segs:
            by_dev.setdefault(int(s.get("device", 0)), []).append(s)
        devs = set(by_dev)
        self._used |= devs
        for d, t in enumerate(traces):
            if t:
                devs.add(d)
        cache: StackCache = {}
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

    def _stacks_frame(self) -> None:
        if not self._stacks.new:
            return
        b = bytearray()
        wire.stacks(b, self._stacks.new)
        self._stacks.new = []
        self.server.broadcast(bytes(b), droppable=False)

    def _publish(self, dev: _Dev, entries: List[Entry], stamp: int, cache: StackCache,
                 segs: Optional[List[Segment]]) -> None:
        if not entries:
            return
        sizes = block_sizes(entries, segs) if segs else None
        b = bytearray()
        encode_entries(b, dev.dev, dev.seq, entries, stamp, self._stacks, cache, sizes)
        self._stacks_frame()
        data = bytes(b)
        first = dev.seq
        dev.seq += len(entries)
        self.published += len(entries)
        self.server.broadcast(data, len(entries), dev.dev, first)
        self._state_cache = None
        dev.buffer.append((first, len(entries), data))
        dev.buffered += len(entries)

    def _seal(self, dev: _Dev, segs: List[Segment], resume: int) -> None:
        self._state_cache = None
        dev.sealed = (segs, resume)
        while dev.buffer and dev.buffer[0][0] < resume:
            _, n, _ = dev.buffer.popleft()
            dev.buffered -= n

    def _resync_frame(self, dev: _Dev, cache: StackCache) -> None:
        assert dev.sealed is not None
        segs, resume = dev.sealed
        b = bytearray()
        encode_snapshot(b, segs, {dev.dev: resume}, self._stacks, cache)
        self._stacks_frame()
        self.server.broadcast(bytes(b))

    def _poll_dev(self, d: int, trace: List[Entry], segs: List[Segment], stamp: int, cache: StackCache) -> None:
        dev = self._devs.get(d)
        first_poll = dev is None
        if dev is None:
            dev = self._devs[d] = _Dev(d)
        ws = workspace_prefix(trace)
        wskeys = [key(e) for e in trace[:ws]]
        if dev.ws is not None and wskeys != dev.ws:
            dev.need_resync = True  # torch_npu's workspace changed: not in the trace
        dev.ws = wskeys
        active = 0
        for s in segs:
            active += int(s.get("active_size", 0))
        n = len(trace)
        anchor = dev.anchor
        dev.anchor = [key(e) for e in trace[max(ws, n - ANCHOR):]]
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
        if mark is not None and pending is not None:
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
        tail = find_tail(anchor, trace, ws) if anchor else ws
        self._publish(dev, trace[ws if tail is None else tail:], stamp, cache, segs)
        self._seal(dev, segs, dev.seq)
        if dev.need_resync:
            self._resync_frame(dev, cache)
            dev.need_resync = False

    def _overflow(self, dev: _Dev) -> None:
        self.overflows += 1
        b = bytearray()
        wire.gap(b, dev.dev, 0, dev.seq)
        self.server.broadcast(bytes(b))
        dev.need_resync = True

    def _heartbeat(self) -> None:
        try:
            with self.mu:
                if not self.server.clients:
                    return
                devs = self._devices(self._used) if self._devinfo else []
                b = bytearray()
                wire.heartbeat(b, int(time.time() * 1e6), devs)
                self.server.broadcast(bytes(b), droppable=False)
        except DATA_ERRORS as e:  # a device figure torch gave that is no integer
            self.report.error("heartbeat", e)

    # ---- what the server sends (server.Source) ----

    def hello(self) -> bytearray:
        b = bytearray()
        # the resolution is the interval as the budget has stretched it
        clock = "poll:%dus" % int(round(self.cur_interval * 1e6)) if self._time_base == wire.TIME_POLL_US else "realtime"
        wire.hello(b, self.pid, platform.node(), self.start_us, int(time.time() * 1e6), clock, self._time_base,
                   self._devinfo, self._settings)
        return b

    def state(self, b: bytearray) -> int:
        """STACKS, SNAPSHOT and the entries since it, for a joining client:
        encoded once per poll and shared by every client that joins (or
        resyncs) before the next, so a reconnect storm costs the job one
        encoding per poll, not one per connection."""
        if self._state_cache is None:
            t0 = time.perf_counter()
            sb = bytearray()
            n = self._encode_state(sb, {})
            self._state_cache = (bytes(sb), n)
            self.state_encodes += 1
            self.cost_s += time.perf_counter() - t0
        data, n = self._state_cache
        b += data
        return n

    def _encode_state(self, b: bytearray, cache: StackCache) -> int:
        segs: List[Segment] = []
        resume: Dict[int, int] = {}
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

    def gaps(self, drop_from: Mapping[int, int]) -> bytes:
        b = bytearray()
        for d, first in sorted(drop_from.items()):
            dev = self._devs.get(d)
            if dev is not None and dev.sealed is not None and dev.sealed[1] > first:
                wire.gap(b, d, dev.sealed[1] - first, dev.sealed[1])
        return bytes(b)

    def stats(self) -> Dict[str, Any]:
        wall = max(time.monotonic() - self._since, 1e-9)
        srv = self.server
        return {"polls": self.polls, "snapshot_s": self.poll_s, "work_s": self.work_s, "published": self.published,
                "overflows": self.overflows, "clients": len(srv.clients), "errors": self.report.errors,
                "skipped": dict(self.report.skipped), "serving": self._serving.is_set(), "socket": srv.path,
                "refused": srv.refused, "stalled": srv.stalled, "state_encodes": self.state_encodes,
                "budget": self.budget, "cost_s": self.cost_s, "cost_share": self.cost_s / wall,
                "interval_s": self.cur_interval}
