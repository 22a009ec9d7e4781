#!/usr/bin/env python3
"""Generate a large, realistic memory snapshot for the replay benchmarks:
N trace entries as alloc / free_requested / free_completed runs over a
working set of live tensors, with time_us, compile_context, user_metadata
and stacks, plus the matching final segments. Written by Python's pickle
(protocol 4).

    python3 gen_bench.py OUT.pickle [N] [SHAPE] [--oom] [--segments]

SHAPE "distinct" is shaped like real dumps: every alloc and
every free_requested has a frames list object of its own (free_completed
shares its free_requested's list), built from a pool of shared frame dicts;
about 60 % of the lists are empty. In the repository's 2026 CUDA fixture,
5,163 entries hold 3,442 distinct frames lists of 83 frame dicts, and these
proportions follow it. SHAPE "shared" (the default) is the older case: every
entry refers to one of 400 stack lists, so the pickle memoizes each list once.

With --oom one oom entry (a request larger than any segment, the device
nearly full) is inserted halfway through the trace. With --segments the
trace begins with a segment_alloc entry per segment (recording started
before the first cudaMalloc, as in most real dumps) and N counts them.
"""
import pickle
import random
import sys

MiB = 1 << 20


def main():
    args = [a for a in sys.argv[1:] if a not in ("--oom", "--segments")]
    out = args[0]
    n = int(args[1]) if len(args) > 1 else 1_000_000
    shape = args[2] if len(args) > 2 else "shared"
    if shape not in ("distinct", "shared"):
        sys.exit("SHAPE is distinct or shared, not %r" % shape)
    distinct = shape == "distinct"
    rnd = random.Random(42)
    files = ["/srv/train/model/layer%d.py" % i for i in range(40)] + \
            ["/usr/lib/python3.11/site-packages/torch/nn/modules/module.py"]
    names = ["forward", "_call_impl", "_wrapped_call_impl", "matmul", "attention", "mlp",
             "backward", "step", "train_step", "<module>"]
    stacks = []
    if distinct:
        # Frame dicts are shared objects (torch's symbolizer dedups frames);
        # the lists holding them are not.
        pool = [{"filename": rnd.choice(files), "line": rnd.randint(1, 2000), "name": rnd.choice(names)}
                for _ in range(200)]
        for _ in range(400):
            stacks.append([rnd.choice(pool) for _ in range(rnd.randint(6, 16))])
    else:
        for _ in range(400):
            depth = rnd.randint(6, 16)
            stacks.append([{"filename": rnd.choice(files), "line": rnd.randint(1, 2000), "name": rnd.choice(names)}
                           for _ in range(depth)])

    def frames_for(p_nonempty):
        if not distinct:
            return rnd.choice(stacks)
        if rnd.random() < p_nonempty:
            return list(rnd.choice(stacks))
        return []

    seg_base = 0x7F0000000000
    n_segs = 256
    seg_size = 64 * MiB
    slots = 64  # live tensors per segment slot
    slot = seg_size // slots
    live = {}
    trace = []
    t0 = t = 1_776_000_000_000_000
    with_segs = "--segments" in sys.argv
    target = n - n_segs if with_segs else n
    while len(trace) < target:
        s = rnd.randrange(n_segs)
        k = rnd.randrange(slots)
        addr = seg_base + s * seg_size + k * slot
        t += rnd.randint(1, 40)
        if addr in live:
            size, fr = live.pop(addr)
            if distinct:
                fr = frames_for(0.22)  # free events carry the freeing stack
            for act in ("free_requested", "free_completed"):
                trace.append({"action": act, "addr": addr, "size": size, "stream": 0, "time_us": t,
                              "compile_context": "N/A", "user_metadata": "", "frames": fr})
        else:
            size = rnd.randint(1, slot // 512) * 512
            fr = frames_for(0.38)
            live[addr] = (size, fr)
            trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t,
                          "compile_context": "N/A", "user_metadata": "", "frames": fr})
    segments = []
    for s in range(n_segs):
        base = seg_base + s * seg_size
        blocks, cur = [], base
        for k in range(slots):
            a = base + k * slot
            if a in live:
                if a > cur:
                    blocks.append({"address": cur, "size": a - cur, "requested_size": 0, "state": "inactive", "frames": []})
                size, fr = live[a]
                blocks.append({"address": a, "size": size, "requested_size": size, "state": "active_allocated", "frames": fr})
                cur = a + size
        if cur < base + seg_size:
            blocks.append({"address": cur, "size": base + seg_size - cur, "requested_size": 0, "state": "inactive", "frames": []})
        alloc = sum(b["size"] for b in blocks if b["state"] != "inactive")
        segments.append({"device": 0, "address": base, "total_size": seg_size, "allocated_size": alloc,
                         "active_size": alloc, "requested_size": alloc, "stream": 0, "segment_type": "large",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks})
    trace = trace[:target]
    if with_segs:
        trace = [{"action": "segment_alloc", "addr": seg_base + s * seg_size, "size": seg_size, "stream": 0,
                  "time_us": t0 - n_segs + s, "compile_context": "N/A", "user_metadata": "", "frames": []}
                 for s in range(n_segs)] + trace
    if "--oom" in sys.argv:
        h = n // 2
        trace.insert(h, {"action": "oom", "size": 2 * seg_size, "stream": 0, "time_us": trace[h - 1]["time_us"],
                         "device_free": 64 * MiB, "compile_context": "N/A", "user_metadata": "",
                         "frames": stacks[0]})
    snap = {"segments": segments, "device_traces": [trace], "allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
        "expandable_segments": False, "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False, "graph_capture_record_stream_reuse": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}, "external_annotations": []}
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
