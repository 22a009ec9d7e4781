#!/usr/bin/env python3
"""Reference implementation of `npumon holders --json` and `npumon explain
--json --no-whatif` (docs/explain.md) on top of Python's own pickle.load /
json.load, written apart from npumon's Go code: the golden files are
written by this script.

    python3 ref_explain.py holders SNAPSHOT [--at peak|end] [--device N] [--by category]
    python3 ref_explain.py explain SNAPSHOT

Paths are left empty; the Go test compares everything else. The what-if
lists are empty here (the allocator simulation is tested in replay/whatif).
"""
import json
import posixpath
import re
import sys

from ref_stats import load, requested, rounder, schema_of, undo_state, with_addresses

ALLOC_FAMILY = {"alloc", "free_requested", "free_completed", "free"}

# docs/explain.md, "Frames and call sites": the default library paths.
LIBRARY = re.compile(
    r"(^|[\\/])(torch|torch_npu|site-packages|dist-packages)[\\/]"
    r"|[\\/][Ll]ib[\\/]python[0-9.]*[\\/]"
    r"|[\\/]Lib[\\/][^\\/]+\.py$"
    r"|^<[^>]*>$")

# Native: C/C++ sources and headers, object and shared files, ?? or no file.
C_SOURCE_EXTS = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp")
OBJECT_EXTS = (".o", ".S", ".a", ".so")
# Internal frames (native whatever their file, never a call site).
INTERNAL_SUBSTRINGS = (
    "unwind::unwind", "CapturedTraceback", "gather_with_cpp",  # the unwinder
    "CachingAllocator",  # the allocator
    "execute_native_thread_routine", "start_thread", "pthread_", "Engine::thread_main",
    "Engine::thread_init", "PythonEngine::thread_init", "__libc_start_main", "__clone",
)
INTERNAL_NAMES = ("clone", "clone3", "__clone3", "_start")


def is_object_file(fn):
    if fn.endswith(OBJECT_EXTS):
        return True
    # libc.so.6, libcudart.so.12.1
    base = fn
    while True:
        head, dot, tail = base.rpartition(".")
        if not dot or not tail.isdigit():
            break
        base = head
    return base != fn and base.endswith(".so")


def is_internal(f):
    if is_object_file(f.get("filename", "")):
        return True
    name = f.get("name", "")
    if name.split("(")[0].strip() in INTERNAL_NAMES:
        return True
    return any(x in name for x in INTERNAL_SUBSTRINGS)


def frame_class(f):
    fn = f.get("filename", "")
    if fn in ("", "??") or fn.endswith(C_SOURCE_EXTS) or is_internal(f):
        return "native"
    if LIBRARY.search(fn):
        return "library"
    return "user"


NODE = re.compile(r"^torch::autograd::(generated::)?(\w+)::apply\(")
ATEN = re.compile(r"^at::_ops::(\w+)::call\(")


TOP_HOLDERS = 5
MAX_OOMS = 16
MIN_LEAK_STEPS = 3


def frames_of(fr):
    return [{"filename": f.get("filename", ""), "line": f.get("line", 0), "name": f.get("name", "")} for f in (fr or [])]


def block_frames(b):
    if b.get("frames"):
        return b["frames"]
    for h in b.get("history") or []:
        if h.get("frames"):
            return h["frames"]
    return []


class Live:
    """Live allocations per address: size, frames, stream, pending, born, born_time."""

    def __init__(self, segs, entries):
        self.live = {}
        seen = set()
        for i, e in enumerate(entries):
            if e["action"] not in ALLOC_FAMILY:
                continue
            a = e["addr"]
            if a in seen:
                continue
            seen.add(a)
            if e["action"] != "alloc":  # rule (a): allocated before the trace
                self.add_start(a, e["size"], e.get("frames") or [], e.get("stream", 0),
                               e["action"] == "free_completed")
        for s in segs:  # rule (b): ghost blocks
            for b in with_addresses(s):
                if b["state"] != "inactive" and b["address"] not in seen:
                    self.add_start(b["address"], requested(b), block_frames(b), s.get("stream", 0),
                                   b["state"] == "active_pending_free")
        self.entries = entries
        self.applied = 0

    def add_start(self, addr, size, fr, stream, pending):
        a = self.live.setdefault(addr, {"addr": addr, "size": 0, "born": -1, "born_time": 0})
        a["size"] += size
        a.update(frames=fr, stream=stream, pending=pending)

    def advance(self, upto):
        while self.applied <= min(upto, len(self.entries) - 1):
            i = self.applied
            e = self.entries[i]
            act = e["action"]
            if act == "alloc":
                a = self.live.setdefault(e["addr"], {"addr": e["addr"], "size": 0})
                a["size"] += e["size"]
                a.update(frames=e.get("frames") or [], stream=e.get("stream", 0), pending=False,
                         born=i, born_time=e.get("time_us") or 0, forward=e.get("forward_frames") or [])
            elif act == "free_requested":
                if e["addr"] in self.live:
                    self.live[e["addr"]]["pending"] = True
            elif act in ("free_completed", "free"):
                a = self.live.get(e["addr"])
                if a is None:
                    a = self.live[e["addr"]] = {"addr": e["addr"], "size": 0, "frames": e.get("frames") or [],
                                                "stream": e.get("stream", 0), "pending": False,
                                                "born": i, "born_time": e.get("time_us") or 0}
                a["size"] -= e["size"]
                if a["size"] == 0:
                    del self.live[e["addr"]]
            self.applied += 1

    def allocs(self):
        return [self.live[k] for k in sorted(self.live)]


def frame_key(f):
    return "%s (%s:%d)" % (f.get("name", ""), f.get("filename", ""), f.get("line", 0))


def callsite_key(fr):
    """The first user frame; with none, the autograd node, the ATen op, the
    innermost library frame, the innermost native frame that is not
    internal, else "(native frames only)"."""
    if not fr:
        return "(no stack)"
    classes = [frame_class(f) for f in fr]
    if "user" in classes:
        return frame_key(fr[classes.index("user")])
    for f in fr:
        m = NODE.match(f.get("name", ""))
        if m and m.group(2) != "Node":
            return m.group(2) + " (backward)"
    for f in fr:
        m = ATEN.match(f.get("name", ""))
        if m:
            return "aten::" + m.group(1)
    if "library" in classes:
        return frame_key(fr[classes.index("library")])
    for f in fr:
        if not is_internal(f):
            return frame_key(f)
    return "(native frames only)"


# docs/explain.md, "Memory categories": the frames each phase of a step
# is recognized by, and the rules over what was allocated while an
# allocation lived.
BACKWARD_FILE = re.compile(r"(^|[\\/])torch[\\/](autograd[\\/](graph|__init__|function)\.py|_tensor\.py)$")
BACKWARD_NAME = re.compile(r"^(_engine_run_backward|backward|grad|run_backward)$")
# autograd's native frames: a node's apply (not the base Node), the engine
AUTOGRAD_NODE = re.compile(r"^torch::autograd::(?:generated::)?([A-Za-z_][A-Za-z0-9_]*)::apply\(")


def native_backward(name):
    m = AUTOGRAD_NODE.match(name)
    return (m is not None and m.group(1) != "Node") or "torch::autograd::Engine::" in name
OPTIM_NAME = re.compile(r"Optimizer\.step|^_?(fused|multi_tensor|single_tensor)_(adam|adamw|sgd|rmsprop|adagrad|lamb|lion)")
INIT_FILE = re.compile(r"(^|[\\/])torch(_npu)?[\\/](nn[\\/](modules[\\/]module|parameter|init)|utils[\\/]_module)\.py$")
INIT_NAME = re.compile(r"^(_apply|convert|to|cuda|npu|reset_parameters|_load_from_state_dict|load_state_dict|__init__|Module\.to)$")
LAYER_FILE = re.compile(r"(^|[\\/])torch[\\/]nn[\\/]modules[\\/][^\\/]+\.py$")
LOAD_NAME = re.compile(r"^(_?init_?weights?\w*|load_(weights?|state_dict|checkpoint|model|pretrained)\w*|from_pretrained)$", re.I)


def phase_of(fr):
    if not fr:
        return "none"
    for f in fr:
        fn, name = f.get("filename", ""), f.get("name", "")
        if optimizer_file(fn) or OPTIM_NAME.search(name):
            return "optimizer"
        if (BACKWARD_NAME.search(name) and BACKWARD_FILE.search(fn)) or native_backward(name):
            return "backward"
        if (INIT_FILE.search(fn) and INIT_NAME.search(name)) or \
                (LAYER_FILE.search(fn) and name in ("__init__", "reset_parameters")) or LOAD_NAME.search(name):
            return "init"
    return "other"


def categories(start, entries):
    """Category of every allocation: key ("e", index) or ("s", addr)."""
    out = {}
    framed = any(e["action"] == "alloc" and e.get("frames") for e in entries)
    born = []  # phase counts at each allocation, in order
    counts = {"all": 0, "backward": 0, "optimizer": 0, "init": 0}
    live = {}
    for a in start:
        live[a["addr"]] = {"key": ("s", a["addr"]), "phase": phase_of(a["frames"]), "ws": False, "at": dict(counts)}
    ws = set()

    def decide(a, never):
        d = {k: counts[k] - a["at"][k] for k in counts}
        p = a["phase"]
        if a["key"][0] == "e":
            d["all"] -= 1
            if p in d:
                d[p] -= 1
        if a["ws"]:
            return "workspace"
        if p == "init":
            return "parameter" if never or d["all"] > d["init"] else "temporary"
        if p == "optimizer":
            return "optimizer_state" if never or d["all"] > d["optimizer"] else "temporary"
        if p == "backward":
            return "gradient" if never or d["all"] > d["backward"] else "temporary"
        if p == "none":
            return "parameter" if never and a["key"][0] == "s" else "unknown"
        if d["backward"] > 0:
            return "activation"
        return "unknown" if never else "temporary"

    for i, e in enumerate(entries):
        act = e["action"]
        if act == "workspace_snapshot":
            ws.add(e["addr"])
        elif act == "alloc":
            p = phase_of(e.get("frames"))
            if p == "none" and framed:
                p = "backward"
            a = {"key": ("e", i), "phase": p, "ws": e["addr"] in ws, "at": dict(counts)}
            ws.discard(e["addr"])
            if e["addr"] in live:
                old = live[e["addr"]]
                out[old["key"]] = decide(old, False)
            live[e["addr"]] = a
            counts["all"] += 1
            if p in counts:
                counts[p] += 1
        elif act in ("free_requested", "free_completed", "free"):
            a = live.pop(e["addr"], None)
            if a is not None:
                out[a["key"]] = decide(a, False)
    for a in live.values():
        out[a["key"]] = decide(a, True)
    return out


def category_of(cats, a):
    key = ("s", a["addr"]) if a["born"] < 0 else ("e", a["born"])
    return cats.get(key, "unknown")


FORWARD_LINE = re.compile(r'^\s*File "(.*)", line (\d+), in (.*?)\s*$')
FORWARD_BARE = re.compile(r"^\s*(\S.*?):(\d+):(.*?)\s*$")


def forward_stack(lines):
    """A forward_frames list (format_stack strings, outermost first) as
    frames innermost first. A string may hold several frames or a bare
    path:line:function; any other string is a frame with no file."""
    out = []
    for s in lines or []:
        got = []
        for ln in s.split("\n"):
            m = FORWARD_LINE.match(ln)
            if m:
                got.append({"filename": m.group(1), "line": int(m.group(2)), "name": m.group(3)})
        if not got:
            m = FORWARD_BARE.match(s) if "\n" not in s else None
            if m:
                got.append({"filename": m.group(1), "line": int(m.group(2)), "name": m.group(3)})
            elif s:
                got.append({"filename": "", "line": 0, "name": s})
        out.extend(got)
    return out[::-1]


def alloc_site(a):
    """The call site of an allocation: its stack's, unless that stack has
    no user frame and its forward traceback has one: then the innermost
    user frame of the traceback, marked [backward]."""
    fr = a.get("frames") or []
    if any(frame_class(f) == "user" for f in fr):
        return callsite_key(fr)
    for f in forward_stack(a.get("forward")):
        if frame_class(f) == "user":
            return frame_key(f) + " [backward]"
    return callsite_key(fr)


def largest_first(a):
    return (-a["size"], a["born"], a["addr"])


def group(allocs, total, key=None):
    groups = {}
    for a in allocs:
        groups.setdefault(key(a) if key else alloc_site(a), []).append(a)
    out = []
    for k, members in groups.items():
        members.sort(key=largest_first)
        b = sum(a["size"] for a in members)
        oldest = min(a["born"] for a in members)
        first_oldest = next(a for a in members if a["born"] == oldest)
        out.append({"key": k, "bytes": b, "share": (b / total) if total else 0, "count": len(members),
                    "largest_bytes": members[0]["size"], "oldest_index": oldest,
                    "oldest_time_us": first_oldest["born_time"] or None,
                    "frames": frames_of(members[0]["frames"])})
    out.sort(key=lambda g: (-g["bytes"], g["key"]))
    return out


def figures(segs, entries, i):
    rnd = ROUND[0]
    reserved = sum(s["total_size"] for s in segs)
    for e in entries:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved -= e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved += e["size"]
    for e in entries[:i + 1]:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
    allocated = cached = largest = 0
    for s in undo_state(segs, entries, i, rnd):
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                allocated += b["size"]
            elif b["state"] == "inactive":
                cached += b["size"]
                largest = max(largest, b["size"])
    return reserved, allocated, cached, largest


def peak_index(live_start, entries):
    v = peak = live_start
    at = -1
    for i, e in enumerate(entries):
        if e["action"] == "alloc":
            v += e["size"]
        elif e["action"] in ("free_completed", "free"):
            v -= e["size"]
        if v > peak:
            peak, at = v, i
    return at


def time_of(entries, i):
    if 0 <= i < len(entries) and entries[i].get("time_us"):
        return entries[i]["time_us"]
    return None


def device_data(top, dev):
    traces = top.get("device_traces") or []
    entries = traces[dev] if dev < len(traces) else []
    segs = [s for s in top["segments"] if s["device"] == dev]
    return segs, entries


def holders(top, dev, at, by="callsite"):
    segs, entries = device_data(top, dev)
    lv = Live(segs, entries)
    start_active = sum(a["size"] for a in lv.live.values())
    key = None
    if by == "category":
        cats = categories(lv.allocs(), entries)
        key = lambda a: category_of(cats, a)
    i = len(entries) - 1 if at == "end" else peak_index(start_active, entries)
    lv.advance(i)
    allocs = lv.allocs()
    active = sum(a["size"] for a in allocs)
    return {"path": "", "device": dev, "at": {"spec": at, "index": i, "time_us": time_of(entries, i)},
            "by": by, "active_bytes": active, "allocated_bytes": figures(segs, entries, i)[1],
            "allocations": len(allocs), "groups": group(allocs, active, key)}


def annotation_ops(top, dev, entries):
    edges = []
    for a in top.get("external_annotations") or []:
        if a.get("device") == dev and a.get("time_us"):
            edges.append((a["time_us"], len(edges), a["name"], a["stage"] == "START"))
    for e in entries:
        if e["action"] == "user_defined" and e.get("time_us") and e.get("frames"):
            f = e["frames"][0]
            edges.append((e["time_us"], len(edges), f["filename"], f["name"] == "START"))
    edges.sort()
    opened, ops = {}, []
    for t, _, name, start in edges:
        if start:
            opened.setdefault(name, []).append(t)
        elif opened.get(name):
            ops.append({"name": name, "start": opened[name].pop(), "end": t,
                        "step": re.fullmatch(r"ProfilerStep#(-?\d+)", name)})
    return ops


def op_at(ops, t):
    """Innermost non-step op with start <= t <= end: latest start, then earliest end, then first."""
    if not t:
        return ""
    best = None
    for o in sorted(ops, key=lambda o: (o["start"], -o["end"])):
        if o["step"] or not (o["start"] <= t <= o["end"]):
            continue
        if best is None or o["start"] > best["start"] or (o["start"] == best["start"] and o["end"] < best["end"]):
            best = o
    return best["name"] if best else ""


def step_points(entries, steps):
    out = []
    for s in steps:
        i = -1
        for j, e in enumerate(entries):
            if not e.get("time_us") or e["time_us"] <= s["end"]:
                i = j
            else:
                break
        if i < 0 or (out and out[-1]["index"] >= i):
            continue
        out.append({"step": s["num"], "index": i, "time_us": time_of(entries, i), "bytes": 0})
    return out


# docs/explain.md "Steps": the sources in order, the first with
# MIN_LEAK_STEPS ends wins, else the first with any.
def optimizer_file(fn):
    # docs/explain.md: a file in a directory named optim or optimizers at
    # any depth, lr_scheduler*.py excepted (steps and categories alike)
    p = (fn or "").replace("\\", "/")
    if posixpath.basename(p).startswith("lr_scheduler"):
        return False
    d = "/" + posixpath.dirname(p) + "/"
    return "/optim/" in d or "/optimizers/" in d


def is_optimizer_step(f):
    return f.get("name") == "step" and optimizer_file(f.get("filename"))


def range_steps(entries, ranges, numbered):
    ranges = sorted(ranges, key=lambda o: o["end"])
    pts = step_points(entries, [dict(o, num=int(o["step"].group(1)) if numbered else n) for n, o in enumerate(ranges)])
    return pts


def optimizer_steps(entries):
    ends, run_open, last = [], False, -1
    for i, e in enumerate(entries):
        fr = e.get("frames")
        if not fr:
            continue
        if any(is_optimizer_step(f) for f in fr):
            last = i
            run_open = run_open or e["action"] == "alloc"
        elif e["action"] == "alloc":
            if run_open:
                ends.append(last)
            run_open = False
    if run_open:
        ends.append(last)
    return ends


def period_steps(entries):
    n = len(entries)
    occ, key_of = {}, [None] * n
    for i, e in enumerate(entries):
        if e["action"] in ("snapshot", "oom"):
            continue
        key = (e["action"], json.dumps(e.get("frames") or [], sort_keys=True), e.get("size", 0))
        occ.setdefault(key, []).append(i)
        key_of[i] = key
    by_count = {}
    for key, o in occ.items():
        if len(o) >= MIN_LEAK_STEPS:
            by_count.setdefault(len(o), []).append(o)
    cands = sorted(by_count, key=lambda c: (-len(by_count[c]), c))[:8]
    fits = []
    for c in cands:
        rows = by_count[c]
        med = [sorted(r[k] for r in rows)[len(rows) // 2] for k in range(c)]
        lo = [2 * med[0] - med[1]] + med[:-1]
        hi = med[1:] + [2 * med[-1] - med[-2]]
        def follows(r, shift):
            ks = range(shift, shift + len(r))
            return (all(lo[k] < r[k - shift] < hi[k] for k in ks)
                    and all(4 * abs((r[k - shift] - r[k - shift - 1]) - (med[k] - med[k - 1])) <= med[k] - med[k - 1]
                            for k in ks[1:]))

        # keys seen c times, and c-1 times missing the first or the last
        # iteration (whichever median their first occurrence is nearer)
        good = [(r, 0) for r in rows if follows(r, 0)]
        for r in by_count.get(c - 1, []):
            shift = 1 if abs(r[0] - med[1]) < abs(r[0] - med[0]) else 0
            if follows(r, shift):
                good.append((r, shift))
        if not good:
            continue
        starts = [min((r[k - sh] for r, sh in good if 0 <= k - sh < len(r)), default=None) for k in range(c)]
        ends = [max((r[k - sh] for r, sh in good if 0 <= k - sh < len(r)), default=None) for k in range(c)]
        if None in starts or any(starts[k] <= ends[k - 1] for k in range(1, c)):
            continue
        span = ends[-1] - starts[0] + 1
        if span < 0.5 * n:
            continue
        ends = [starts[k + 1] - 1 for k in range(c - 1)] + [ends[-1]]  # contiguous
        # half the iterations' entries have keys that recur
        recur = sum(1 for i in range(starts[0], ends[-1] + 1)
                    if key_of[i] is not None and len(occ[key_of[i]]) >= MIN_LEAK_STEPS)
        if recur < 0.5 * span:
            continue
        fits.append((c, len(good), starts, ends))
    if not fits:
        return None
    best = min(fits, key=lambda f: (-f[1], f[0]))  # the most-followed
    outer = [f for f in fits if 2 * f[0] <= best[0] and 4 * f[1] >= best[1]]
    return min(outer, key=lambda f: f[0]) if outer else best


PERIOD_NONE = ("the trace does not repeat: no stack, action and size recurs in three or more "
               "iterations spanning half of it")


def detect_steps(entries, ops):
    """(source, points, note)"""
    timed = any(e.get("time_us") for e in entries)
    markers = [o for o in ops if o["step"]]
    opt = [o for o in ops if not o["step"] and o["name"].startswith("Optimizer.step#")]
    notes, fallback = [], None
    tried = []
    for src, ranges, what in (("profiler", markers, "ProfilerStep#N ranges"),
                              ("annotation", opt, "Optimizer.step annotations")):
        pts, note = [], ""
        if ranges and not timed:
            note = "%d %s not placed: the trace has no time_us" % (len(ranges), what)
        elif ranges:
            pts = range_steps(entries, ranges, src == "profiler")
        tried.append((src, pts, note))
    ends = optimizer_steps(entries)
    tried.append(("optimizer", [{"step": k, "index": i, "time_us": time_of(entries, i), "bytes": 0}
                                for k, i in enumerate(ends)], ""))
    fit = period_steps(entries)
    if fit:
        tried.append(("period", [{"step": k, "index": i, "time_us": time_of(entries, i), "bytes": 0}
                                 for k, i in enumerate(fit[3])], ""))
    else:
        tried.append(("period", [], PERIOD_NONE))
    for src, pts, note in tried:
        if len(pts) >= MIN_LEAK_STEPS:
            return src, pts, ""
        if pts and fallback is None:
            fallback = (src, pts, "")
        if note:
            notes.append(note)
    return fallback or ("", [], "; ".join(notes))


def explain_device(top, dev):
    segs, entries = device_data(top, dev)
    ops = annotation_ops(top, dev, entries)
    start_active = sum(a["size"] for a in Live(segs, entries).live.values())
    ooms = [i for i, e in enumerate(entries) if e["action"] == "oom"][:MAX_OOMS]
    kind = "oom"
    if not ooms:
        kind, ooms = "peak", [peak_index(start_active, entries)]
    source, points, note = detect_steps(entries, ops)
    cats = categories(Live(segs, entries).allocs(), entries)

    def cat_bytes(i):
        lv = Live(segs, entries)
        lv.advance(i)
        sums = {}
        for a in lv.allocs():
            k = category_of(cats, a)
            sums[k] = sums.get(k, 0) + a["size"]
        return sums

    out = []
    for i in ooms:
        lv = Live(segs, entries)
        lv.advance(i)
        allocs = lv.allocs()
        # the category that grew most since the last step end before i
        base_idx = max([p["index"] for p in points if p["index"] < i], default=-1)
        base, now = cat_bytes(base_idx), cat_bytes(i)
        grew = None
        for k in sorted(now):
            d = now[k] - base.get(k, 0)
            if d > 0 and (grew is None or d > grew["bytes_to"] - grew["bytes_from"]):
                grew = {"category": k, "from_index": base_idx, "bytes_from": base.get(k, 0), "bytes_to": now[k]}
        reserved, allocated, cached, largest = figures(segs, entries, i)
        o = {"kind": kind, "index": i, "time_us": time_of(entries, i), "requested_bytes": 0,
             "device_free_bytes": None, "reserved_bytes": reserved, "allocated_bytes": allocated,
             "inactive_bytes": cached, "largest_free_block_bytes": largest, "verdict": "none",
             "op": "", "frames": [], "whatif": []}
        if i >= 0:
            e = entries[i]
            o["requested_bytes"] = e["size"]
            o["frames"] = frames_of(e.get("frames"))
            o["op"] = op_at(ops, e.get("time_us"))
            if kind == "oom":
                free = e.get("device_free", 0)
                o["device_free_bytes"] = free
                o["verdict"] = "shortage" if allocated + e["size"] > reserved + free else "fragmentation"
        o["top_holders"] = group(allocs, sum(a["size"] for a in allocs))[:TOP_HOLDERS]
        o["grew"] = grew
        out.append(o)

    series = []
    last_groups = {}
    for p in points:
        lv = Live(segs, entries)
        lv.advance(p["index"])
        sums = {}
        for a in lv.allocs():
            k = alloc_site(a)
            sums[k] = sums.get(k, 0) + a["size"]
        series.append(sums)
        last_groups = {g["key"]: g for g in group(lv.allocs(), 0)}
    suspects = []
    k = len(series)
    if k >= MIN_LEAK_STEPS:
        for key in series[-1]:
            b = [s.get(key, 0) for s in series]
            j = k - 1
            while j > 0 and b[j - 1] <= b[j]:
                j -= 1
            run = k - j
            if run < MIN_LEAK_STEPS or b[-1] <= b[j]:
                continue
            ups = sum(1 for x in range(j + 1, k) if b[x] > b[x - 1])
            if 2 * ups < run - 1:
                continue
            suspects.append({"key": key, "growth_bytes_per_step": (b[-1] - b[j]) // (run - 1),
                             "steps": [dict(points[x], bytes=b[x]) for x in range(j, k)],
                             "frames": last_groups[key]["frames"]})
    suspects.sort(key=lambda s: (-s["growth_bytes_per_step"], s["key"]))
    d = {"device": dev, "steps": len(points), "step_source": source, "ooms": out, "leak_suspects": suspects}
    if note:
        d["step_note"] = note
    return d


def devices(top):
    traces = top.get("device_traces") or []
    n = max([len(traces)] + [s["device"] + 1 for s in top["segments"]])
    return [d for d in range(n) if (d < len(traces) and traces[d]) or any(s["device"] == d for s in top["segments"])]


# the file's round_size (ref_stats.rounder), set by main: blocks the undo
# re-creates are round_size(requested), as in ref_stats
ROUND = [lambda n: n]


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    fmt, top = load(path)
    schema, _ = schema_of(top, fmt)
    ROUND[0] = rounder(top if isinstance(top, dict) else {}, schema == "torch_npu")
    if isinstance(top, list):
        top = {"segments": top, "device_traces": []}
    if cmd == "holders":
        at = sys.argv[sys.argv.index("--at") + 1] if "--at" in sys.argv else "peak"
        dev = int(sys.argv[sys.argv.index("--device") + 1]) if "--device" in sys.argv else 0
        by = sys.argv[sys.argv.index("--by") + 1] if "--by" in sys.argv else "callsite"
        out = holders(top, dev, at, by)
    else:
        out = {"path": "", "devices": [explain_device(top, d) for d in devices(top)]}
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
