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


def schema_of(top, fmt):
    if isinstance(top, list):
        return "torch-1.13"
    traces = [e for tr in top.get("device_traces", []) for e in tr]
    blocks = [b for s in top["segments"] for b in s["blocks"]]
    settings = top.get("allocator_settings")
    if any(e["action"] == "workspace_snapshot" for e in traces) or (settings and "PYTORCH_NPU_ALLOC_CONF" in settings):
        return "torch_npu"
    if any(b.get("history") for b in blocks) or any("address" not in b for b in blocks):
        return "torch-2.0"
    streams = [s.get("stream", 0) for s in top["segments"]] + [e.get("stream", 0) for e in traces]
    if not any("time_us" in e for e in traces) and not settings and any(streams):
        return "torch_npu"
    return "torch-2.1+"


def undo_state(final_segs, entries, upto):
    """Segments and live blocks after entry `upto`, undoing later entries
    (docs/reference/snapshot-format.md §6.5)."""
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
            blocks[a] = {"address": a, "size": n, "requested_size": n, "state": "active_pending_free"}
        elif act == "free_requested":
            if a in blocks:
                blocks[a]["state"] = "active_allocated"
            else:
                blocks[a] = {"address": a, "size": n, "requested_size": n, "state": "active_allocated"}
        elif act == "free":
            blocks[a] = {"address": a, "size": n, "requested_size": n, "state": "active_allocated"}
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
    d["reserved_bytes"] = sum(s["total_size"] for s in segs)
    d["allocated_bytes"] = d["active_bytes"] = d["requested_bytes"] = d["inactive_bytes"] = 0
    d["largest_free_block_bytes"] = 0
    for s in segs:
        for b in s["blocks"]:
            if b["state"] == "active_allocated":
                d["allocated_bytes"] += b["size"]
                d["active_bytes"] += b["size"]
                d["requested_bytes"] += b.get("requested_size") or 0
            elif b["state"] == "active_pending_free":
                d["active_bytes"] += b["size"]
            else:
                d["inactive_bytes"] += b["size"]
                d["largest_free_block_bytes"] = max(d["largest_free_block_bytes"], b["size"])


def device_stats(dev, segs, entries, has_time, at_index):
    d = {"device": dev}
    seg_figures(d, [{"total_size": s["total_size"], "blocks": with_addresses(s)} for s in segs])
    d["blocks"] = sum(len(s["blocks"]) for s in segs)
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
    d["peak_active_bytes"], d["peak_active_index"] = peak, peak_i
    d["peak_active_time_us"] = entries[peak_i].get("time_us") if (has_time and peak_i >= 0) else None
    d["peak_reserved_bytes"] = rpeak
    d["oom_events"] = actions.get("oom", 0)
    if at_index is not None:
        seg_figures(d, undo_state(segs, entries, at_index))
        d["blocks"], d["active_bytes"], d["reserved_bytes"] = len(at_live), at_active, at_reserved
    return d


def main():
    path = sys.argv[1]
    at_index = int(sys.argv[sys.argv.index("--at-index") + 1]) if "--at-index" in sys.argv else None
    fmt, top = load(path)
    schema = schema_of(top, fmt)
    if isinstance(top, list):
        top = {"segments": top, "device_traces": []}
    traces = top.get("device_traces") or []
    has_time = any(e.get("time_us") for tr in traces for e in tr)
    n = max([len(traces)] + [s["device"] + 1 for s in top["segments"]])
    devices = [d for d in range(n)
               if (d < len(traces) and traces[d]) or any(s["device"] == d for s in top["segments"])]
    out = {"path": "", "kind": "snapshot", "format": fmt, "schema": schema, "has_timestamps": has_time}
    if at_index is not None:
        out["at_index"] = at_index
    out["devices"] = [device_stats(d, [s for s in top["segments"] if s["device"] == d],
                                   traces[d] if d < len(traces) else [], has_time, at_index)
                      for d in devices]
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
