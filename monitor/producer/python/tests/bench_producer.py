"""Cost of one producer poll against the ring size (make bench-producer).

Drives npumon_producer.Producer in-process on the stand-in allocator with a
synthetic training loop (alloc/free pairs with 3-frame stacks): the ring is
full (max_entries = R) and every poll finds T new entries. Reports, per
poll, in CPU time of the polling thread, the producer's own work (finding the new tail, encoding, queueing)
and the stand-in's _snapshot() (Python dict building: NOT torch's cost,
which is C++ / pybind and also proportional to R).
"""
import sys
import time

import npumon_standin
import npumon_producer

MiB = 1 << 20


def synthetic(n, seed=1):
    base = 0x7F0000000000
    seg = 64 * MiB
    stacks = [[{"filename": "/srv/train/model.py", "line": 10 + i, "name": "layer%d" % i},
               {"filename": "/srv/train/train.py", "line": 99, "name": "step"},
               {"filename": "/srv/train/train.py", "line": 7, "name": "main"}] for i in range(16)]
    trace = []
    live = []
    t = 1_700_000_000_000_000
    x = seed
    while len(trace) < n:
        x = (x * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        if live and (x >> 33) % 2:
            a, s, fr = live.pop(0)
            trace.append({"action": "free_requested", "addr": a, "size": s, "stream": 0, "frames": fr})
            trace.append({"action": "free_completed", "addr": a, "size": s, "stream": 0, "frames": fr})
        else:
            slot = len(trace) % 1024
            a = base + slot * 65536
            if any(a == l[0] for l in live):
                continue
            s = 512 * (1 + (x >> 40) % 100)
            fr = stacks[(x >> 20) % 16]
            live.append((a, s, fr))
            trace.append({"action": "alloc", "addr": a, "size": s, "stream": 0, "frames": fr})
    trace = trace[:n]
    # the final state: blocks still live at the end
    alive = {}
    for e in trace:
        if e["action"] == "alloc":
            alive[e["addr"]] = e
        elif e["action"] == "free_completed":
            alive.pop(e["addr"], None)
    blocks, at = [], base
    for a in sorted(alive):
        if a > at:
            blocks.append({"address": at, "size": a - at, "requested_size": 0, "state": "inactive", "frames": []})
        sz = -(-alive[a]["size"] // 512) * 512
        blocks.append({"address": a, "size": sz, "requested_size": alive[a]["size"], "state": "active_allocated",
                       "frames": alive[a]["frames"]})
        at = a + sz
    if at < base + seg:
        blocks.append({"address": at, "size": base + seg - at, "requested_size": 0, "state": "inactive", "frames": []})
    segs = [{"device": 0, "address": base, "total_size": seg, "stream": 0, "segment_type": "large",
             "is_expandable": False, "frames": [], "blocks": blocks}]
    return {"segments": segs, "device_traces": [[dict(e, time_us=t + i) for i, e in enumerate(trace)]]}


def run(ring, tail, polls=20):
    final = synthetic(ring + tail * (polls + 2))
    a = npumon_standin.Allocator(final, npu=False)
    npumon_standin.current = a
    import torch.cuda.memory as mem

    class Timed:  # CPU time of the stand-in's _snapshot(), kept apart
        spent = 0.0

        def _record_memory_history(self, **kw):
            mem._record_memory_history(**kw)

        def _snapshot(self):
            t = time.thread_time()
            try:
                return mem._snapshot()
            finally:
                Timed.spent += time.thread_time() - t

    p = npumon_producer.Producer(interval=3600, max_entries=ring)
    p._mem, p._conf_key, p._time_base = Timed(), "PYTORCH_CUDA_ALLOC_CONF", 0
    p._enable()
    a.advance(ring)  # a full ring
    p._poll_locked()
    p._poll_locked()
    Timed.spent = 0.0
    total = 0.0
    for _ in range(polls):
        a.advance(tail)
        t = time.thread_time()
        p._poll_locked()
        total += time.thread_time() - t
    return (total - Timed.spent) / polls, Timed.spent / polls, p.published, p.overflows


def main():
    tail = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print("ring_entries  new_per_poll  producer_ms_per_poll  standin_snapshot_ms_per_poll  overflows")
    for ring in (1024, 16384, 131072):
        work, snap, _, ov = run(ring, tail)
        print("%12d  %12d  %20.2f  %28.2f  %9d" % (ring, tail, work * 1e3, snap * 1e3, ov))


if __name__ == "__main__":
    t0 = time.time()
    main()
    print("(%.1f s)" % (time.time() - t0))
