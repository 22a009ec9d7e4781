#!/usr/bin/env python3
"""Generate forward_frames.pickle with Python's own pickle: a torch 2.8
shaped snapshot (time_us, allocator_settings, stacks='all') whose backward
allocations have native stacks only (the autograd engine's thread) and a
"forward_frames" list: the forward pass's traceback, format_stack strings,
outermost first. Three iterations of a small training loop:

  activations     user stacks (/job/model.py), freed in backward
  BmmBackward0    forward_frames one frame a string; innermost user frame
                  /job/model.py:58 forward (torch's own frames inside it)
  MmBackward0     forward_frames: a bare "path:line:function" and one
                  string holding two frames; innermost user /job/model.py:40
  AddBackward0    forward_frames in no known shape: stays the node
  MulBackward0    no forward_frames (an older build): the node

The lists are fresh objects on some entries and shared through the memo
on others, as a pickler writes either.

    python3 gen_forward.py OUTDIR
"""
import os
import pickle
import sys

from snapgen import fr, segment

MiB = 1 << 20
BASE = 0x7F6000000000
SEG = 1 << 30
T0 = 1_760_000_000_000_000


MAIN = ("/job/train.py", 120, "main")
PARAM = fr(("/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", 1326, "convert"), MAIN)
ACT = fr(("/venv/lib/python3.12/site-packages/torch/nn/functional.py", 2140, "gelu"),
         ("/job/model.py", 40, "Block.forward"), ("/job/model.py", 58, "forward"),
         ("/job/train.py", 57, "train_step"), MAIN)


def native(node, op):
    """A stacks='all' stack on autograd's engine thread: no Python frame."""
    return fr(("??", 0, "torch::unwind::unwind()"),
              ("??", 0, "torch::CapturedTraceback::gather(bool, bool, bool)"),
              ("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"),
              ("??", 0, "at::_ops::%s::call(at::Tensor const&, at::Tensor const&)" % op),
              ("??", 0, "torch::autograd::generated::%s::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)" % node),
              ("??", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"),
              ("??", 0, "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)"),
              ("??", 0, "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
              ("thread48.o", 0, "execute_native_thread_routine"),
              ("??", 0, "start_thread"), ("??", 0, "clone"))


BMM = native("BmmBackward0", "bmm")
MM = native("MmBackward0", "mm")
ADD = native("AddBackward0", "add_Tensor")
MUL = native("MulBackward0", "mul_Tensor")

# format_stack order: outermost first, one frame and its source line a string.
FWD_ATTN = [
    '  File "/job/train.py", line 120, in main\n    train_step(batch)\n',
    '  File "/job/train.py", line 57, in train_step\n    out = model(x)\n',
    '  File "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 1751, in _call_impl\n'
    '    return forward_call(*args, **kwargs)\n',
    '  File "/job/model.py", line 58, in forward\n    y = self.attn(x)\n',
    '  File "/venv/lib/python3.12/site-packages/torch/functional.py", line 407, in einsum\n'
    '    return _VF.einsum(equation, operands)\n',
]
FWD_MLP = [
    "/job/train.py:57:train_step",
    '  File "/job/model.py", line 90, in Model.forward\n    h = blk(h)\n'
    '  File "/job/model.py", line 40, in Block.forward\n    return self.fc(h)\n',
    '  File "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", line 125, in forward\n'
    '    return F.linear(input, self.weight, self.bias)\n',
]
FWD_ODD = ["<traceback not available>"]


class Trace:
    def __init__(self):
        self.t, self.next = T0, BASE
        self.trace, self.live = [], {}
        self.ev("segment_alloc", BASE, SEG, PARAM)

    def ev(self, action, addr, size, frames, fwd=None):
        self.t += 11
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": self.t, "frames": frames}
        if fwd is not None:
            e["forward_frames"] = fwd
        self.trace.append(e)

    def alloc(self, size, frames, fwd=None):
        a = self.next
        self.next += size
        self.ev("alloc", a, size, frames, fwd)
        self.live[a] = (size, frames, fwd)
        return a

    def free(self, a):
        size, frames, fwd = self.live.pop(a)
        self.ev("free_requested", a, size, frames, fwd)
        self.ev("free_completed", a, size, frames, fwd)

    def snapshot(self):
        seg = segment(self.live, BASE, SEG, PARAM)
        settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                    "expandable_segments": False, "pinned_num_register_threads": 1,
                    "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
                    "roundup_power2_divisions": {}, "graph_capture_record_stream_reuse": False}
        return {"segments": [seg], "device_traces": [self.trace], "allocator_settings": settings,
                "external_annotations": []}


def build():
    tr = Trace()
    tr.alloc(8 * MiB, PARAM)
    for it in range(3):
        acts = [tr.alloc(4 * MiB, ACT) for _ in range(2)]
        # The gradients stay (accumulated across iterations); temporaries go.
        tr.alloc(3 * MiB, BMM, list(FWD_ATTN) if it == 0 else FWD_ATTN)
        tmp = tr.alloc(1 * MiB, BMM, FWD_ATTN)
        tr.alloc(2 * MiB, MM, FWD_MLP)
        tr.alloc(512 * 1024, ADD, FWD_ODD)
        tr.alloc(256 * 1024, MUL)
        tr.alloc(128 * 1024, MUL, [])
        tr.free(tmp)
        for a in acts:
            tr.free(a)
    return tr.snapshot()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(os.path.join(out, "forward_frames.pickle"), "wb") as f:
        pickle.dump(build(), f, protocol=4)


if __name__ == "__main__":
    main()
