#!/usr/bin/env python3
"""Reference implementation of `npumon stats --json` (docs/timeline.md) on top
of Python's own pickle.load / json.load: the golden files are written by this
script, independently of npumon's Go decoder and timeline code.

    python3 ref_stats.py SNAPSHOT [--at-index I] > golden.json

The "path" field is left empty; the Go test compares everything else.
"""
import json
import pickle
import sys

ALLOC_FAMILY = {"alloc", "free_requested", "free_completed", "free"}


def load(path):
    data = open(path, "rb").read()
    if data[:1] == b"\x80":
        return "pickle", pickle.loads(data)
    return "json", json.loads(data)


def requested(b):
    if b.get("requested_size"):
        return b["requested_size"]
    h = b.get("history") or []
    if h and h[0].get("real_size"):
        return h[0]["real_size"]
    return b["size"]


def with_addresses(seg):
    a = seg["address"]
    out = []
    for b in seg["blocks"]:
        b = dict(b)
        b.setdefault("address", a)
        if "requested_size" not in b and b["state"] != "inactive":
            b["requested_size"] = requested(b)
        a += b["size"]
        out.append(b)
    return out


NPU_MARKS = ("torch_npu", "c10_npu", "NPUCachingAllocator", "at_npu::", "aclrt")
CUDA_MARKS = ("torch/cuda/", "c10/cuda/", "libc10_cuda", "libtorch_cuda", "CUDACachingAllocator", "c10::cuda::", "cudaMalloc")


def all_frames(top):
    for s in top["segments"]:
        yield from s.get("frames") or []
        for b in s["blocks"]:
            yield from b.get("frames") or []
            for h in b.get("history") or []:
                yield from h.get("frames") or []
    for tr in top.get("device_traces", []):
        for e in tr:
            yield from e.get("frames") or []


def frame_evidence(top):
    npu = cuda = 0
    seen = set()
    for f in all_frames(top):
        key = (f.get("filename", ""), f.get("line", 0), f.get("name", ""))
        if key in seen:
            continue
        seen.add(key)
        fn, name = key[0], key[2]
        if any(m in fn or m in name for m in NPU_MARKS):
            npu += 1
        elif any(m in fn.replace("\\", "/") or m in name for m in CUDA_MARKS):
            cuda += 1
    return npu, cuda


def schema_of(top, fmt):
    """Schema and the evidence that decided it, strongest first."""
    if isinstance(top, list):
        return "torch-1.13", "a bare list of segments (the torch 1.13 layout)"
    traces = [e for tr in top.get("device_traces", []) for e in tr]
    blocks = [b for s in top["segments"] for b in s["blocks"]]
    settings = top.get("allocator_settings")
    keys = [k for k in (settings or {}) if k.endswith("_ALLOC_CONF")]
    npu, cuda = frame_evidence(top)
    streams = [s["stream"] for s in top["segments"] if "stream" in s] + [e["stream"] for e in traces if "stream" in e]
    if any(e["action"] == "workspace_snapshot" for e in traces):
        return "torch_npu", "workspace_snapshot entries (torch_npu's workspace triples)"
    if any("NPU" in k for k in keys):
        return "torch_npu", "allocator_settings names PYTORCH_NPU_ALLOC_CONF"
    if npu > cuda:
        return "torch_npu", "%d frames inside torch_npu (%d inside torch's CUDA code)" % (npu, cuda)
    if any(b.get("history") for b in blocks) or any("address" not in b for b in blocks):
        return "torch-2.0", "blocks carry history / no address (the torch 2.0 layout)"
    if any("CUDA" in k or "HIP" in k for k in keys):
        return "torch-2.1+", "allocator_settings names PYTORCH_CUDA_ALLOC_CONF"
    if cuda > npu:
        return "torch-2.1+", "%d frames inside torch's CUDA code (%d inside torch_npu)" % (cuda, npu)
    if any(e.get("time_us") is not None for e in traces):
        return "torch-2.1+", "trace entries carry time_us (torch_npu records none)"
    if settings is not None:
        return "torch-2.1+", "allocator_settings present (torch_npu writes none)"
    if any(x == 0 for x in streams):
        return "torch-2.1+", "stream 0 is CUDA's default stream (torch_npu's streams are aclrtStream handles)"
    if any(streams):
        return "torch_npu", "only non-zero stream handles, and nothing else decides (weak evidence)"
    return "torch-2.1+", "nothing decides: PyTorch's CUDA layout assumed"


def rounder(top, npu):
    """round_size of the file's allocator (docs/reference/allocator-semantics.md §1)."""
    div = [0] * 16
    settings = top.get("allocator_settings") or {}
    for k, v in (settings.get("roundup_power2_divisions") or {}).items():
        mib = int(k)
        if mib > 0:
            div[min(mib.bit_length() - 1, 15)] = v

    def round_size(n):
        if n <= 0:
            return n
        if npu:
            n += 32
        if n < 512:
            return 512
        d = div[min(max(n.bit_length() - 1 - 20, 0), 15)]
        if d > 1 and n > 512 * d:
            if n & (n - 1) == 0:
                return n
            floor2 = 1 << (n.bit_length() - 1)
            step = floor2 >> (d.bit_length() - 1)
            if step == 0:
                return floor2 << 1
            return (n + step - 1) // step * step
        return (n + 511) // 512 * 512
    return round_size


def undo_state(final_segs, entries, upto, rnd):
    """Segments and live blocks after entry `upto`, undoing later entries
    (docs/reference/snapshot-format.md §6.5); re-created blocks are
    round_size(requested) and marked estimated."""
    segs = {s["address"]: dict(s) for s in final_segs}
    blocks = {}
    for s in final_segs:
        for b in with_addresses(s):
            if b["state"] != "inactive":
                blocks[b["address"]] = dict(b)
    for e in reversed(entries[upto + 1:]):
        a, n, act = e.get("addr", 0), e["size"], e["action"]
        if act == "alloc":
            blocks.pop(a, None)
        elif act == "free_completed":
            blocks[a] = {"address": a, "size": rnd(n), "requested_size": n, "state": "active_pending_free", "est": True}
        elif act == "free_requested":
            if a in blocks:
                blocks[a]["state"] = "active_allocated"
            else:
                blocks[a] = {"address": a, "size": rnd(n), "requested_size": n, "state": "active_allocated", "est": True}
        elif act == "free":
            blocks[a] = {"address": a, "size": rnd(n), "requested_size": n, "state": "active_allocated", "est": True}
        elif act == "segment_alloc":
            segs.pop(a, None)
        elif act == "segment_free":
            segs[a] = {"address": a, "total_size": n, "stream": e.get("stream", 0)}
        elif act == "segment_map":
            for base, s in list(segs.items()):
                end, send = a + n, base + s["total_size"]
                if base <= a < send:
                    del segs[base]
                    if a > base:
                        segs[base] = dict(s, total_size=a - base)
                    if end < send:
                        segs[end] = dict(s, address=end, total_size=send - end)
                    break
        elif act == "segment_unmap":
            s = {"address": a, "total_size": n, "stream": e.get("stream", 0)}
            for base, p in list(segs.items()):
                if p.get("stream", 0) == s["stream"] and base + p["total_size"] == a:
                    del segs[base]
                    s = dict(p, total_size=p["total_size"] + n)
                    break
            nxt = segs.get(s["address"] + s["total_size"])
            if nxt is not None and nxt.get("stream", 0) == s["stream"]:
                del segs[nxt["address"]]
                s["total_size"] += nxt["total_size"]
            segs[s["address"]] = s
    # Tile: live blocks inside each segment, gaps inactive.
    out = []
    for base in sorted(segs):
        s = segs[base]
        end = base + s["total_size"]
        tiles, cur = [], base
        for a in sorted(x for x in blocks if base <= x < end):
            b = blocks[a]
            if a > cur:
                tiles.append({"size": a - cur, "state": "inactive"})
            tiles.append(b)
            cur = max(cur, a + b["size"])
        if cur < end:
            tiles.append({"size": end - cur, "state": "inactive"})
        out.append({"total_size": s["total_size"], "blocks": tiles})
    return out


def seg_figures(d, segs):
    d["segments"] = len(segs)
    d["blocks"] = sum(len(s["blocks"]) for s in segs)
    d["live_blocks"] = sum(1 for s in segs for b in s["blocks"] if b["state"] != "inactive")
    d["estimated_blocks"] = sum(1 for s in segs for b in s["blocks"] if b["state"] != "inactive" and b.get("est"))
    d["reserved_bytes"] = sum(s["total_size"] for s in segs)
    d["allocated_bytes"] = d["requested_bytes"] = d["inactive_bytes"] = 0
    d["largest_free_block_bytes"] = 0
    for s in segs:
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                d["allocated_bytes"] += b["size"]
                d["requested_bytes"] += b.get("requested_size") or 0
            elif b["state"] == "inactive":
                d["inactive_bytes"] += b["size"]
                d["largest_free_block_bytes"] = max(d["largest_free_block_bytes"], b["size"])
    free = d["inactive_bytes"]
    d["free_fragmentation"] = 1 - d["largest_free_block_bytes"] / free if free > 0 else 0
    d["inactive_fraction"] = free / d["reserved_bytes"] if d["reserved_bytes"] else 0


def device_stats(dev, segs, entries, has_time, at_index, rnd):
    d = {"device": dev}
    seg_figures(d, [{"total_size": s["total_size"], "blocks": with_addresses(s)} for s in segs])
    d["trace_entries"] = len(entries)
    actions = {}
    for e in entries:
        actions[e["action"]] = actions.get(e["action"], 0) + 1
    d["actions"] = actions
    times = [e["time_us"] for e in entries if e.get("time_us")] if has_time else []
    d["first_time_us"] = times[0] if times else None
    d["last_time_us"] = times[-1] if times else None

    first, live = {}, {}
    for e in entries:
        if e["action"] in ALLOC_FAMILY and e["addr"] not in first:
            first[e["addr"]] = e
            if e["action"] != "alloc":
                live[e["addr"]] = live.get(e["addr"], 0) + e["size"]
    for s in segs:
        for b in with_addresses(s):
            if b["state"] != "inactive" and b["address"] not in first:
                live[b["address"]] = live.get(b["address"], 0) + requested(b)
    active = sum(live.values())
    reserved = d["reserved_bytes"]
    for e in entries:
        if e["action"] in ("segment_alloc", "segment_map"):
            reserved -= e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved += e["size"]
    d["active_bytes_at_start"], d["reserved_bytes_at_start"] = active, reserved
    peak, peak_i, rpeak = active, -1, reserved
    at_active, at_reserved, at_live = active, reserved, dict(live)
    for i, e in enumerate(entries):
        if e["action"] == "alloc":
            active += e["size"]
            if at_index is not None and i <= at_index:
                at_live[e["addr"]] = at_live.get(e["addr"], 0) + e["size"]
        elif e["action"] in ("free_completed", "free"):
            active -= e["size"]
            if at_index is not None and i <= at_index:
                v = at_live.get(e["addr"], 0) - e["size"]
                if v:
                    at_live[e["addr"]] = v
                else:
                    at_live.pop(e["addr"], None)
        elif e["action"] in ("segment_alloc", "segment_map"):
            reserved += e["size"]
        elif e["action"] in ("segment_free", "segment_unmap"):
            reserved -= e["size"]
        if active > peak:
            peak, peak_i = active, i
        rpeak = max(rpeak, reserved)
        if at_index is not None and i == at_index:
            at_active, at_reserved = active, reserved
    if at_index is not None and at_index >= len(entries):
        at_active, at_reserved = active, reserved  # a shorter trace: its final state
    d["active_bytes"] = active  # the active series' end
    d["peak_active_bytes"], d["peak_active_index"] = peak, peak_i
    d["peak_active_time_us"] = entries[peak_i].get("time_us") if (has_time and peak_i >= 0) else None
    d["peak_reserved_bytes"] = rpeak
    d["oom_events"] = actions.get("oom", 0)
    # a file's times are its own; recovered ones come from a profiler run
    d["time_source"] = "trace" if any(e.get("time_us") for e in entries) else "none"
    d["time_recovered_from"] = None
    d["time_recovered_share"] = None
    if at_index is not None:
        seg_figures(d, undo_state(segs, entries, at_index, rnd))
        d["live_blocks"], d["active_bytes"], d["reserved_bytes"] = len(at_live), at_active, at_reserved
    return d


def main():
    path = sys.argv[1]
    at_index = int(sys.argv[sys.argv.index("--at-index") + 1]) if "--at-index" in sys.argv else None
    fmt, top = load(path)
    schema, evidence = schema_of(top, fmt)
    rnd = rounder(top if isinstance(top, dict) else {}, schema == "torch_npu")
    if isinstance(top, list):
        top = {"segments": top, "device_traces": []}
    traces = top.get("device_traces") or []
    has_time = any(e.get("time_us") for tr in traces for e in tr)
    n = max([len(traces)] + [s["device"] + 1 for s in top["segments"]])
    devices = [d for d in range(n)
               if (d < len(traces) and traces[d]) or any(s["device"] == d for s in top["segments"])]
    out = {"path": "", "kind": "snapshot", "format": fmt, "schema": schema, "schema_evidence": evidence,
           "has_timestamps": has_time}
    if at_index is not None:
        out["at_index"] = at_index
    out["devices"] = [device_stats(d, [s for s in top["segments"] if s["device"] == d],
                                   traces[d] if d < len(traces) else [], has_time, at_index, rnd)
                      for d in devices]
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
