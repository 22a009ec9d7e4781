#!/usr/bin/env python3
"""Write a three-rank job's snapshots with Python's own pickle (an
independent producer) for the ranks tests.

    python3 gen_ranks.py OUTDIR

OUTDIR/job/snapshot_rank{N}_step10.pickle, one per rank. Rank N runs on
device N: its device_traces hold N empty lists, then its trace. Each trace
reserves one segment of R MiB, allocates A MiB, frees it, and keeps 1 MiB;
rank 1 also records an OOM. So per rank (docs/timeline.md):

    rank  R (peak reserved)  A (peak active)  final active  OOMs
    0     20 MiB             10 MiB           1 MiB         0
    1     40 MiB             30 MiB           1 MiB         1
    2     30 MiB             15 MiB           1 MiB         0

and the imbalance: peak reserved 40/20 = 2.0 (max rank 1, min rank 0),
peak active 30/10 = 3.0 (max rank 1, min rank 0).
"""
import os
import pickle
import sys

MiB = 1 << 20
RANKS = [(20, 10, False), (40, 30, True), (30, 15, False)]


def snapshot(rank, r_mib, a_mib, oom):
    base = 0x12C000000000 + rank * 0x100000000
    t = 1_700_000_000_000_000 + rank * 1000
    trace = []

    def ev(action, addr, size, **kw):
        nonlocal t
        t += 10
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": []}
        e.update(kw)
        trace.append(e)

    ev("segment_alloc", base, r_mib * MiB)
    ev("alloc", base, a_mib * MiB)
    ev("free_requested", base, a_mib * MiB)
    ev("free_completed", base, a_mib * MiB)
    ev("alloc", base, 1 * MiB)
    if oom:
        ev("oom", 0, 64 * MiB, device_free=MiB)
        del trace[-1]["addr"]
    seg = {"device": rank, "address": base, "total_size": r_mib * MiB, "allocated_size": MiB,
           "active_size": MiB, "requested_size": MiB, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
           "blocks": [{"address": base, "size": MiB, "requested_size": MiB, "state": "active_allocated", "frames": []},
                      {"address": base + MiB, "size": (r_mib - 1) * MiB, "requested_size": 0, "state": "inactive",
                       "frames": []}]}
    return {"segments": [seg], "device_traces": [[] for _ in range(rank)] + [trace]}


def main(out):
    job = os.path.join(out, "job")
    os.makedirs(job, exist_ok=True)
    for rank, (r, a, oom) in enumerate(RANKS):
        with open(os.path.join(job, "snapshot_rank%d_step10.pickle" % rank), "wb") as f:
            pickle.dump(snapshot(rank, r, a, oom), f, protocol=4)


if __name__ == "__main__":
    main(sys.argv[1])
