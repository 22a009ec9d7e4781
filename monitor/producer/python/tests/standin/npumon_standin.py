"""A stand-in caching allocator for the producer's tests (no torch here).

It replays a recorded snapshot (a real fixture or a generated one) as if a
job were running: the snapshot's trace is the job's future, the state before
its first entry is reconstructed by undoing the trace from the final state
(docs/timeline.md's rules, independently of npumon's Go code), and advance(n)
lets n more entries happen. _snapshot() behaves as torch's / torch_npu's:
the trace is copied first, then the segments are taken and a `snapshot`
entry (size = total active bytes) is recorded; torch_npu's workspace triples
are prepended to every trace; the ring buffer keeps the newest max_entries.
"""

import collections
import pickle
import threading

MiB = 1 << 20
SMALL_SEGMENT_MAX = 2 * MiB


def _frames(blk):
    fr = blk.get("frames")
    if fr is None and blk.get("history"):
        fr = blk["history"][0].get("frames")
    return fr or []


def _requested(blk):
    if "requested_size" in blk:
        return blk["requested_size"]
    h = blk.get("history")
    if h and "real_size" in h[0]:
        return h[0]["real_size"]
    return blk["size"]


class _State:
    """Segments (without blocks) and live blocks of one device."""

    def __init__(self):
        self.segs = {}
        self.blocks = {}

    def copy(self):
        s = _State()
        s.segs = {a: dict(v) for a, v in self.segs.items()}
        s.blocks = {a: dict(v) for a, v in self.blocks.items()}
        return s

    def undo(self, e):
        a, addr, size = e["action"], e.get("addr", 0), e.get("size", 0)
        if a == "alloc":
            self.blocks.pop(addr, None)
        elif a == "free_completed":
            self.blocks[addr] = self._block(e, "active_pending_free")
        elif a == "free_requested":
            if addr in self.blocks:
                self.blocks[addr]["state"] = "active_allocated"
            else:
                self.blocks[addr] = self._block(e, "active_allocated")
        elif a == "free":
            self.blocks[addr] = self._block(e, "active_allocated")
        elif a == "segment_alloc":
            self.segs.pop(addr, None)
        elif a == "segment_free":
            self.segs[addr] = self._segment(e, False)
        elif a == "segment_map":
            self._cut(addr, size)
        elif a == "segment_unmap":
            self._remap(e)

    @staticmethod
    def _block(e, state):
        return {"address": e["addr"], "size": e["size"], "requested_size": e["size"], "state": state,
                "frames": e.get("frames") or []}

    @staticmethod
    def _segment(e, expandable):
        s = {"address": e["addr"], "total_size": e["size"], "stream": e.get("stream", 0),
             "segment_type": "large" if e["size"] > SMALL_SEGMENT_MAX else "small",
             "is_expandable": expandable, "frames": e.get("frames") or []}
        if "pool_id" in e:
            s["segment_pool_id"] = tuple(e["pool_id"])
        return s

    def _cut(self, addr, size):
        end = addr + size
        for base, s in list(self.segs.items()):
            s_end = s["address"] + s["total_size"]
            if addr < s["address"] or addr >= s_end:
                continue
            if addr == s["address"] and end >= s_end:
                del self.segs[base]
            elif addr == s["address"]:
                del self.segs[base]
                s["address"], s["total_size"] = end, s_end - end
                self.segs[end] = s
            elif end >= s_end:
                s["total_size"] = addr - s["address"]
            else:
                tail = dict(s, address=end, total_size=s_end - end)
                s["total_size"] = addr - s["address"]
                self.segs[end] = tail
            return

    def _remap(self, e):
        s = self._segment(e, True)
        for base, n in list(self.segs.items()):
            if n["stream"] == s["stream"] and n["address"] + n["total_size"] == s["address"]:
                del self.segs[base]
                n["total_size"] += s["total_size"]
                s = n
                break
        end = s["address"] + s["total_size"]
        n = self.segs.get(end)
        if n is not None and n["stream"] == s["stream"]:
            del self.segs[end]
            s["total_size"] += n["total_size"]
        self.segs[s["address"]] = s

    def segments(self, device):
        """torch segment dicts, tiled by live and inactive blocks."""
        out = []
        blocks = sorted(self.blocks.values(), key=lambda b: b["address"])
        bi = 0
        for s in sorted(self.segs.values(), key=lambda s: s["address"]):
            seg = dict(s, device=device)
            start, end = s["address"], s["address"] + s["total_size"]
            while bi < len(blocks) and blocks[bi]["address"] < start:
                bi += 1
            cur, tiles = start, []
            alloc = active = req = 0
            while bi < len(blocks) and blocks[bi]["address"] < end:
                b = blocks[bi]
                bi += 1
                if b["address"] > cur:
                    tiles.append({"address": cur, "size": b["address"] - cur, "requested_size": 0,
                                  "state": "inactive", "frames": []})
                tiles.append(dict(b))
                active += b["size"]
                req += b["requested_size"]
                if b["state"] == "active_allocated":
                    alloc += b["size"]
                cur = max(cur, b["address"] + b["size"])
            if cur < end:
                tiles.append({"address": cur, "size": end - cur, "requested_size": 0, "state": "inactive",
                              "frames": []})
            seg.update(blocks=tiles, allocated_size=alloc, active_size=active, requested_size=req)
            out.append(seg)
        return out


class Allocator:
    """The stand-in allocator: final is a snapshot dict (as _snapshot()
    returns), every device's trace the job's future."""

    CHECKPOINT = 256

    def __init__(self, final, npu=True):
        self.npu = npu
        self.lock = threading.RLock()
        segs = final["segments"] if isinstance(final, dict) else final
        traces = final.get("device_traces", []) if isinstance(final, dict) else []
        self.settings = final.get("allocator_settings") if isinstance(final, dict) else None
        ndev = max([len(traces)] + [s["device"] + 1 for s in segs])
        self.ndev = ndev
        self.workspace, self.future = [], []
        for d in range(ndev):
            t = traces[d] if d < len(traces) else []
            w = 0
            while npu and w + 2 < len(t) and t[w]["action"] == "workspace_snapshot":
                w += 3
            self.workspace.append(list(t[:w]))
            self.future.append(list(t[w:]))
        self.has_time = any("time_us" in e for t in self.future for e in t)
        final_states = []
        for d in range(ndev):
            st = _State()
            for s in segs:
                if s["device"] != d:
                    continue
                at = s["address"]
                seg = {k: v for k, v in s.items() if k not in ("blocks", "device", "allocated_size", "active_size",
                                                               "requested_size")}
                seg.setdefault("is_expandable", False)
                seg.setdefault("frames", [])
                st.segs[s["address"]] = seg
                for b in s["blocks"]:
                    addr = b.get("address", at)
                    at = addr + b["size"]
                    if b["state"] != "inactive":
                        st.blocks[addr] = {"address": addr, "size": b["size"], "requested_size": _requested(b),
                                           "state": "active_pending_free" if b["state"] == "active_awaiting_free"
                                           else b["state"], "frames": _frames(b)}
            final_states.append(st)
        # checkpoints: the state before entry i for i a multiple of CHECKPOINT
        self.checkpoints = []
        for d in range(ndev):
            fut = self.future[d]
            st = final_states[d].copy()
            cps = {len(fut): st.copy()}
            for i in range(len(fut) - 1, -1, -1):
                st.undo(fut[i])
                if i % self.CHECKPOINT == 0:
                    cps[i] = st.copy()
            self.checkpoints.append(cps)
        self.pos = [0] * ndev
        self.ring = [collections.deque() for _ in range(ndev)]
        self.max_entries = None
        self.recording = False
        self.race = 0  # entries that happen between copying the trace and taking the segments
        self.last = None
        self.calls = 0
        self.initialized = True

    @classmethod
    def load(cls, path, npu=True):
        with open(path, "rb") as f:
            return cls(pickle.load(f), npu)

    def state_at(self, d, p):
        cps = self.checkpoints[d]
        fut = self.future[d]
        q = min(k for k in cps if k >= p)
        st = cps[q].copy()
        for i in range(q - 1, p - 1, -1):
            st.undo(fut[i])
        return st

    def remaining(self, d=0):
        return len(self.future[d]) - self.pos[d]

    def advance(self, n, d=0):
        """n more of the job's entries happen on device d."""
        with self.lock:
            fut = self.future[d]
            stop = min(len(fut), self.pos[d] + n)
            for i in range(self.pos[d], stop):
                if self.recording:
                    self._record(d, fut[i])
            self.pos[d] = stop

    def _record(self, d, e):
        r = self.ring[d]
        r.append(e)
        if self.max_entries is not None and len(r) > self.max_entries:
            r.popleft()

    def record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=None, device=None):
        with self.lock:
            self.recording = enabled == "all"
            self.max_entries = max_entries
            if not self.recording:
                for r in self.ring:
                    r.clear()

    def snapshot(self):
        with self.lock:
            traces = [list(self.workspace[d]) + list(self.ring[d]) for d in range(self.ndev)]
        if self.race:
            self.advance(self.race)
        with self.lock:
            segs = []
            for d in range(self.ndev):
                dsegs = self.state_at(d, self.pos[d]).segments(d)
                segs.extend(dsegs)
                if self.recording:
                    mark = {"action": "snapshot", "addr": 0, "size": sum(s["active_size"] for s in dsegs), "stream": 0}
                    if self.has_time:
                        fut, p = self.future[d], self.pos[d]
                        if fut:  # the time of the newest entry that happened
                            mark["time_us"] = fut[p - 1]["time_us"] if p > 0 else fut[0]["time_us"] - 1
                    self._record(d, mark)
            snap = {"segments": segs, "device_traces": traces}
            if self.settings is not None:
                snap["allocator_settings"] = self.settings
            self.last = snap
            self.calls += 1
            return snap


# The process-wide stand-in the fake torch / torch_npu modules talk to.
current = None
