#!/usr/bin/env python3
"""Generate dumps whose allocator (torch_npu or PyTorch's CUDA one) must be
told from evidence other than the newest keys, with Python's own pickle
(reference snapshot-format.md §2, §5):

  flavour_cuda21_sidestream.pickle  torch 2.1 CUDA: no time_us, no
      allocator_settings, Python frames of user code only, the default
      stream 0 and a side stream (a cudaStream_t pointer).
  flavour_cuda21_sideonly.pickle    torch 2.1 CUDA, every block on a side
      stream, C++ frames of the CUDA caching allocator (context="all").
  flavour_npu_frames.pickle         torch_npu without workspace blocks:
      aclrtStream handles, frames inside torch_npu.
  flavour_npu_streams.pickle        torch_npu, no frames at all: only its
      non-zero stream handles speak for it (weak evidence).

Run: python3 gen_flavours.py  (writes next to this script).
"""
import os
import pickle

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def fr(*pairs):
    return [{"filename": f, "line": 10 + i, "name": n} for i, (f, n) in enumerate(pairs)]


USER = fr(("/home/u/train.py", "forward"), ("/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", "_call_impl"))
CUDA_CPP = fr(("??", "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long, CUstream_st*)"),
              ("??", "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, int, unsigned long, CUstream_st*)"),
              ("/home/u/train.py", "forward"))
NPU = fr(("/usr/local/python3.9/site-packages/torch_npu/utils/_module.py", "_call_impl"),
         ("/home/u/train.py", "forward"))


def dump(name, streams, frames):
    """Two 20 MiB segments, one per stream; an alloc freed on each and one live."""
    base = 0x7F2A_0000_0000 if streams[0] == 0 or streams[0] < (1 << 40) else 0x12C0_0000_0000
    segs, tr = [], []
    for k, s in enumerate(streams):
        a = base + k * 20 * MiB
        tr += [
            {"action": "segment_alloc", "addr": a, "size": 20 * MiB, "stream": s, "frames": frames},
            {"action": "alloc", "addr": a, "size": 4 * MiB, "stream": s, "frames": frames},
            {"action": "free_requested", "addr": a, "size": 4 * MiB, "stream": s, "frames": frames},
            {"action": "free_completed", "addr": a, "size": 4 * MiB, "stream": s, "frames": frames},
            {"action": "alloc", "addr": a, "size": 1000, "stream": s, "frames": frames},
        ]
        segs.append({
            "device": 0, "address": a, "total_size": 20 * MiB, "allocated_size": 1024, "active_size": 1024,
            "requested_size": 1000, "stream": s, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": frames,
            "blocks": [
                {"address": a, "size": 1024, "requested_size": 1000, "state": "active_allocated", "frames": frames},
                {"address": a + 1024, "size": 20 * MiB - 1024, "requested_size": 0, "state": "inactive", "frames": []},
            ],
        })
    with open(os.path.join(HERE, name), "wb") as f:
        pickle.dump({"segments": segs, "device_traces": [tr]}, f, protocol=4)


if __name__ == "__main__":
    dump("flavour_cuda21_sidestream.pickle", [0, 0x55D0_C3A1_B2C0], USER)
    dump("flavour_cuda21_sideonly.pickle", [0x55D0_C3A1_B2C0], CUDA_CPP)
    dump("flavour_npu_frames.pickle", [0xAAAA_E3C0_1230, 0xAAAA_E3C0_5670], NPU)
    dump("flavour_npu_streams.pickle", [0xAAAA_E3C0_1230], [])
