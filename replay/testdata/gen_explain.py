#!/usr/bin/env python3
"""Generate leak_steps.pickle with Python's own pickle: a torch 2.5+ style
snapshot of six training steps (ProfilerStep#N external annotations) in
which one call site keeps 1 MiB per step, nested record_function ranges,
library frames on Windows and POSIX paths, and a final oom entry that
fails for fragmentation (enough cached free bytes, no block large enough).

    python3 gen_explain.py OUTDIR
"""
import os
import pickle
import sys

MiB = 1 << 20
BASE = 0x7F2000000000


def fr(*pairs):
    return [{"filename": f, "line": l, "name": n} for f, l, n in pairs]


PARAM = fr(("C:\\venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py", 1326, "convert"),
           ("C:\\venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py", 1329, "to"),
           ("C:\\job\\train.py", 40, "main"))
ACT = fr(("/usr/lib/python3/dist-packages/torch/nn/functional.py", 2140, "softmax"),
         ("/job/model.py", 58, "Attention.forward"),
         ("/usr/lib/python3.11/runpy.py", 88, "_run_code"))
LEAK = fr(("/job/train.py", 71, "log_hidden_states"), ("/job/train.py", 118, "main"))
METRIC = fr(("/job/metrics.py", 18, "Tracker.record"), ("/job/train.py", 90, "main"))
CACHE = fr(("<frozen importlib._bootstrap>", 241, "_call_with_frames_removed"),
           ("/job/cache.py", 33, "KVCache.append"), ("/job/train.py", 99, "main"))


def build():
    t = 1_710_000_000_000_000
    trace, anns = [], []

    def ev(action, addr, size, frames=None, **kw):
        nonlocal t
        t += 5
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t}
        if frames is not None:
            e["frames"] = frames
        e.update(kw)
        trace.append(e)

    def ann(name, stage, at=None):
        nonlocal t
        if at is None:
            t += 5
            at = t
        anns.append({"name": name, "stage": stage, "device": 0, "time_us": at})

    ev("segment_alloc", BASE, 64 * MiB, PARAM)
    ev("alloc", BASE, 8 * MiB, PARAM)
    metric = None
    for n in range(1, 7):
        ann("ProfilerStep#%d" % n, "START")
        leak_at = BASE + 8 * MiB + n * 9 * MiB - 9 * MiB
        act_at = leak_at + 1 * MiB
        ann("model.forward", "START")
        ann("aten::softmax", "START")
        ev("alloc", act_at, 4 * MiB, ACT)
        ann("aten::softmax", "END")
        ev("alloc", leak_at, 1 * MiB, LEAK)
        ann("model.forward", "END")
        if metric is not None:
            ev("free_requested", metric, 512 * 1024, METRIC)
            ev("free_completed", metric, 512 * 1024, METRIC)
            metric = None
        if n % 2:
            metric = act_at + 4 * MiB
            ev("alloc", metric, 512 * 1024, METRIC)
        ev("free_requested", act_at, 4 * MiB, ACT)
        ev("free_completed", act_at, 4 * MiB, ACT)
        ann("ProfilerStep#%d" % n, "END")
    # the failing request: inside aten::cat, whose range ends at the oom's microsecond
    ann("aten::cat", "START")
    ev("oom", 0, 20 * MiB, CACHE, device_free=2 * MiB)
    del trace[-1]["addr"]
    ann("aten::cat", "END", at=t)

    live = {BASE: (8 * MiB, PARAM)}
    for n in range(1, 7):
        live[BASE + 8 * MiB + (n - 1) * 9 * MiB] = (1 * MiB, LEAK)
    if metric is not None:
        live[metric] = (512 * 1024, METRIC)
    blocks, cur = [], BASE
    for a in sorted(live):
        if a > cur:
            blocks.append({"address": cur, "size": a - cur, "requested_size": 0, "state": "inactive", "frames": []})
        size, frames = live[a]
        blocks.append({"address": a, "size": size, "requested_size": size, "state": "active_allocated", "frames": frames})
        cur = a + size
    if cur < BASE + 64 * MiB:
        blocks.append({"address": cur, "size": BASE + 64 * MiB - cur, "requested_size": 0, "state": "inactive", "frames": []})
    used = sum(v[0] for v in live.values())
    seg = {"device": 0, "address": BASE, "total_size": 64 * MiB, "allocated_size": used, "active_size": used,
           "requested_size": used, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": PARAM, "blocks": blocks}
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": False, "pinned_num_register_threads": 1,
                "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}}
    return {"segments": [seg], "device_traces": [trace], "allocator_settings": settings,
            "external_annotations": anns}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(out, "leak_steps.pickle"), "wb") as f:
        pickle.dump(build(), f, protocol=4)


if __name__ == "__main__":
    main()
