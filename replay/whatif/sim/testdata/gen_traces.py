#!/usr/bin/env python3
"""Generate what-if test traces with Python's own pickle, in the torch 2.x
_dump_snapshot dict schema (docs/reference/snapshot-format.md §2).

Each trace is what the caching allocator would record for a known pattern;
the segment and oom entries are worked out by hand from
docs/reference/allocator-semantics.md §1–§2, so the expected what-if answers
are known:

  fragmentation.pickle  torch_npu style (no time_us, no allocator_settings).
      10 x 90 MiB segments are cached, refilled with 30 MiB blocks of which one
      per segment stays live; a 200 MiB request then OOMs on a 1 GiB device with
      900 MiB reserved and 300 MiB allocated. It fits with expandable segments.
  max_split.pickle      torch_npu style. A cached 200 MiB segment is split by a
      12 MiB request, so the next 200 MiB request OOMs on a 256 MiB device; with
      max_split_size_mb:100 the small request gets its own segment and it fits.
  deferred.pickle       CUDA 2.3+ style (time_us, allocator_settings with
      max_split_size 200 MiB), default stream and a side stream: two allocations
      live before the trace (one freed in it, one a ghost block), and a 24 MiB
      block freed with record_stream, whose free completes three entries later,
      so the next 24 MiB request needs a second segment.
  workspace.pickle      torch_npu style with the synthetic workspace_snapshot,
      segment_alloc, alloc triple torch_npu prepends for a workspace allocator
      block (8 MiB), then a 4 MiB request in a 20 MiB segment, freed.
  expandable.pickle     torch_npu style with expandable segments (segment_map,
      no allocator_settings): a 40 MiB request maps two 20 MiB pages and is
      freed; a 20 MiB request reuses the front; a 40 MiB request then takes the
      free 20 MiB tail and one more mapped page. Reserved peaks at 60 MiB;
      classic segments would need 80 MiB (a second 40 MiB segment).

  lost_history.pickle   torch_npu style, recorded after fragmentation: ten 20 MiB
      segments each hold one 2 MiB block allocated before recording began and
      never freed (ghost blocks), the rest cached. A 4 MiB request takes the
      front of the first cached block and is freed; a 30 MiB request then OOMs
      (200 MiB reserved, 10 MiB free on the device). The what-if cannot know
      where those blocks were made: it packs them into one segment, so its
      baseline fits the request and does not reproduce the run.

Run: python3 gen_traces.py  (writes the .pickle files next to this script).
"""
import os
import pickle

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def entry(action, addr, size, stream, t=None, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "frames": []}
    if action == "oom":
        del e["addr"]
        e["device_free"] = extra.pop("device_free")
    if t is not None:
        e["time_us"] = t
    e.update(extra)
    return e


def segment(addr, total, stream, blocks, small=False):
    """blocks: list of (size, requested_size, state), tiling the segment."""
    out, a = [], addr
    for size, req, state in blocks:
        out.append({"address": a, "size": size, "requested_size": req, "state": state, "frames": []})
        a += size
    assert a == addr + total, "blocks must tile the segment"
    alloc = sum(b["size"] for b in out if b["state"] == "active_allocated")
    active = sum(b["size"] for b in out if b["state"] != "inactive")
    return {
        "device": 0, "address": addr, "total_size": total,
        "allocated_size": alloc, "active_size": active,
        "requested_size": sum(b["requested_size"] for b in out if b["state"] != "inactive"),
        "stream": stream, "segment_type": "small" if small else "large",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": out,
    }


def dump(name, snap):
    with open(os.path.join(HERE, name), "wb") as f:
        pickle.dump(snap, f, protocol=4)


def fragmentation():
    S = 0xFFFF_A000_1000  # an aclrtStream handle
    base = 0x12C0_0000_0000
    seg = [base + k * 90 * MiB for k in range(10)]
    tr = []
    for a in seg:  # each 90 MiB request gets a segment of its own (NPU pad: 90 MiB - 32 + 32)
        tr += [entry("segment_alloc", a, 90 * MiB, S), entry("alloc", a, 90 * MiB - 32, S)]
    for a in seg:
        tr += [entry("free_requested", a, 90 * MiB - 32, S), entry("free_completed", a, 90 * MiB - 32, S)]
    for k in range(30):  # best fit: three 30 MiB blocks per cached segment, lowest address first
        tr.append(entry("alloc", seg[k // 3] + (k % 3) * 30 * MiB, 30 * MiB - 32, S))
    for a in seg:  # keep the first block of each segment
        for j in (1, 2):
            x = a + j * 30 * MiB
            tr += [entry("free_requested", x, 30 * MiB - 32, S), entry("free_completed", x, 30 * MiB - 32, S)]
    # 200 MiB: no cached block, 124 MiB left on the 1 GiB device, nothing releasable.
    tr.append(entry("oom", 0, 200 * MiB, S, device_free=124 * MiB))
    segs = [segment(a, 90 * MiB, S, [(30 * MiB, 30 * MiB - 32, "active_allocated"), (60 * MiB, 0, "inactive")]) for a in seg]
    dump("fragmentation.pickle", {"segments": segs, "device_traces": [tr]})
    return len(tr)


def max_split():
    S = 0xFFFF_A000_1000
    A = 0x12C0_0000_0000
    tr = [
        entry("segment_alloc", A, 200 * MiB, S),
        entry("alloc", A, 200 * MiB - 32, S),
        entry("free_requested", A, 200 * MiB - 32, S),
        entry("free_completed", A, 200 * MiB - 32, S),
        entry("alloc", A, 12 * MiB - 32, S),  # best fit splits the cached 200 MiB block
        entry("oom", 0, 200 * MiB, S, device_free=56 * MiB),  # 188 MiB left in it, 56 MiB on the device
        entry("free_requested", A, 12 * MiB - 32, S),
        entry("free_completed", A, 12 * MiB - 32, S),
    ]
    segs = [segment(A, 200 * MiB, S, [(200 * MiB, 0, "inactive")])]
    dump("max_split.pickle", {"segments": segs, "device_traces": [tr]})


def deferred():
    s1, s2 = 0, 0x7F3A_2C00_0E00  # CUDA default stream and a side stream
    P, Q, R, T = 0x7F00_0000_0000, 0x7F00_0200_0000, 0x7F00_0400_0000, 0x7F00_0600_0000
    t0 = 1_700_000_000_000_000
    seq = [
        ("free_requested", P + 4 * MiB, 4 * MiB, s1),  # allocated before the trace (rule a)
        ("free_completed", P + 4 * MiB, 4 * MiB, s1),
        ("segment_alloc", Q, 24 * MiB, s1),
        ("alloc", Q, 24 * MiB, s1),
        ("free_requested", Q, 24 * MiB, s1),  # record_stream(side stream): the free waits
        ("segment_alloc", R, 24 * MiB, s1),  # so the next 24 MiB request needs a new segment
        ("alloc", R, 24 * MiB, s1),
        ("free_completed", Q, 24 * MiB, s1),  # process_events at the start of the next malloc
        ("alloc", Q, 24 * MiB, s1),  # reuses Q
        ("free_requested", R, 24 * MiB, s1),
        ("free_completed", R, 24 * MiB, s1),
        ("free_requested", Q, 24 * MiB, s1),
        ("free_completed", Q, 24 * MiB, s1),
        ("segment_alloc", T, 2 * MiB, s2),  # small pool on the side stream
        ("alloc", T, 1000, s2),
        ("free_requested", T, 1000, s2),
        ("free_completed", T, 1000, s2),
    ]
    tr = [entry(a, x, n, s, t=t0 + i * 1000) for i, (a, x, n, s) in enumerate(seq)]
    segs = [
        # P: 20 MiB segment of a 4 MiB request; the ghost block G is still live.
        segment(P, 20 * MiB, s1, [(4 * MiB, 4 * MiB, "active_allocated"), (16 * MiB, 0, "inactive")]),
        segment(Q, 24 * MiB, s1, [(24 * MiB, 0, "inactive")]),
        segment(R, 24 * MiB, s1, [(24 * MiB, 0, "inactive")]),
        segment(T, 2 * MiB, s2, [(2 * MiB, 0, "inactive")], small=True),
    ]
    settings = {
        "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:200",
        "max_split_size": 200 * MiB,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": False,
        "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
    }
    dump("deferred.pickle", {"segments": segs, "device_traces": [tr], "allocator_settings": settings,
                              "external_annotations": []})


def workspace():
    S = 0xFFFF_A000_1000
    W, A = 0x12C0_0000_0000, 0x12C0_0080_0000
    tr = [
        entry("workspace_snapshot", W, 8 * MiB, S),
        entry("segment_alloc", W, 8 * MiB, S),
        entry("alloc", W, 8 * MiB, S),
        entry("segment_alloc", A, 20 * MiB, S),  # 1-10 MiB requests get a 20 MiB segment
        entry("alloc", A, 4 * MiB - 32, S),
        entry("free_requested", A, 4 * MiB - 32, S),
        entry("free_completed", A, 4 * MiB - 32, S),
    ]
    segs = [
        segment(W, 8 * MiB, S, [(8 * MiB, 8 * MiB, "active_allocated")]),
        segment(A, 20 * MiB, S, [(20 * MiB, 0, "inactive")]),
    ]
    dump("workspace.pickle", {"segments": segs, "device_traces": [tr]})


def expandable():
    S = 0xFFFF_A000_1000
    B = 0x12C0_0000_0000  # the stream's expandable segment (large pool)
    tr = [
        entry("segment_map", B, 40 * MiB, S),
        entry("alloc", B, 40 * MiB - 32, S),
        entry("free_requested", B, 40 * MiB - 32, S),
        entry("free_completed", B, 40 * MiB - 32, S),
        entry("alloc", B, 20 * MiB - 32, S),
        entry("segment_map", B + 40 * MiB, 20 * MiB, S),
        entry("alloc", B + 20 * MiB, 40 * MiB - 32, S),
    ]
    seg = segment(B, 60 * MiB, S, [(20 * MiB, 20 * MiB - 32, "active_allocated"),
                                   (40 * MiB, 40 * MiB - 32, "active_allocated")])
    seg["is_expandable"] = True
    dump("expandable.pickle", {"segments": [seg], "device_traces": [tr]})


def lost_history():
    S = 0xFFFF_A000_1000
    base = 0x12C0_0000_0000
    seg = [base + k * 20 * MiB for k in range(10)]
    x = seg[0] + 2 * MiB  # best fit: the first cached 18 MiB block, lowest address
    tr = [
        entry("alloc", x, 4 * MiB - 32, S),
        entry("free_requested", x, 4 * MiB - 32, S),
        entry("free_completed", x, 4 * MiB - 32, S),
        entry("oom", 0, 30 * MiB, S, device_free=10 * MiB),
    ]
    segs = [segment(a, 20 * MiB, S, [(2 * MiB, 2 * MiB - 32, "active_allocated"), (18 * MiB, 0, "inactive")]) for a in seg]
    dump("lost_history.pickle", {"segments": segs, "device_traces": [tr]})


if __name__ == "__main__":
    fragmentation()
    max_split()
    deferred()
    workspace()
    expandable()
    lost_history()
