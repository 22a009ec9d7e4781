#!/usr/bin/env python3
"""Write the capture the metrics collector test reads, with Python's own
pickle (an independent producer), and print the figures it must export.

    python3 gen_metrics.py OUTDIR

capture.pickle: one device, two segments (8 MiB and 2 MiB), a trace with a
completed free, a pending free at the end and one OOM. The figures printed
below are worked out by hand from docs/timeline.md's rules and are the ones
metrics_test.go expects.
"""
import os
import pickle
import sys

KiB, MiB = 1 << 10, 1 << 20
A, B = 0x10000000, 0x20000000


def main(out):
    t = 1_700_000_000_000_000
    trace = []

    def ev(action, addr, size, **kw):
        nonlocal t
        t += 10
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "frames": []}
        e.update(kw)
        trace.append(e)

    ev("segment_alloc", A, 8 * MiB)
    ev("alloc", A, 1 * MiB)                    # active 1
    ev("alloc", A + 1 * MiB, 2 * MiB)          # active 3
    ev("alloc", A + 3 * MiB, 1 * MiB)          # active 4
    ev("free_requested", A + 1 * MiB, 2 * MiB) # active 4, allocated 2 (pending 2)
    ev("free_completed", A + 1 * MiB, 2 * MiB) # active 2
    ev("segment_alloc", B, 2 * MiB)
    ev("alloc", B, 512 * KiB)                  # active 2.5
    ev("alloc", A + 4 * MiB, 3 * MiB)          # active 5.5 = peak, allocated 5.5 = peak
    ev("free_requested", A + 4 * MiB, 3 * MiB) # pending at the end: allocated 2.5
    ev("oom", 0, 64 * MiB, device_free=1234)
    del trace[-1]["addr"]

    def blk(addr, size, state, req=None):
        return {"address": addr, "size": size, "requested_size": size if req is None else req,
                "state": state, "frames": []}

    segments = [
        {"device": 0, "address": A, "total_size": 8 * MiB, "allocated_size": 2 * MiB,
         "active_size": 5 * MiB, "requested_size": 5 * MiB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [blk(A, 1 * MiB, "active_allocated"),
                    blk(A + 1 * MiB, 2 * MiB, "inactive", 0),
                    blk(A + 3 * MiB, 1 * MiB, "active_allocated"),
                    blk(A + 4 * MiB, 3 * MiB, "active_pending_free"),
                    blk(A + 7 * MiB, 1 * MiB, "inactive", 0)]},
        {"device": 0, "address": B, "total_size": 2 * MiB, "allocated_size": 512 * KiB,
         "active_size": 512 * KiB, "requested_size": 512 * KiB, "stream": 0, "segment_type": "small",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [blk(B, 512 * KiB, "active_allocated"),
                    blk(B + 512 * KiB, 2 * MiB - 512 * KiB, "inactive", 0)]},
    ]
    with open(os.path.join(out, "capture.pickle"), "wb") as f:
        pickle.dump({"segments": segments, "device_traces": [trace]}, f, protocol=4)

    free = 2 * MiB + 1 * MiB + (2 * MiB - 512 * KiB)
    print("active", 5 * MiB + 512 * KiB)
    print("allocated", 2 * MiB + 512 * KiB)
    print("reserved", 10 * MiB)
    print("peak_active", 5 * MiB + 512 * KiB)
    print("peak_allocated", 5 * MiB + 512 * KiB)
    print("cached_free", free)
    print("largest_free", 2 * MiB)
    print("largest_free_ratio", repr((2 * MiB) / free))
    print("segments 2\nlive_blocks 4\nooms 1\nentries", len(trace))


if __name__ == "__main__":
    main(sys.argv[1])
