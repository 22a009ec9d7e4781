#!/usr/bin/env python3
"""Generate one snapshot per step source (docs/explain.md "Steps") with
Python's own pickle. Each is a small training loop whose LEAK call site
keeps 1 MiB per iteration:

  steps_annotation.pickle  Optimizer.step#AdamW.step ranges in
                           external_annotations (time_us), optimizer step
                           frames too: the annotations come first
  steps_optimizer.pickle   no time_us (as torch_npu), torch/optim/adamw.py
                           step frames, an lr_scheduler step frame that
                           must not count, a batch size that varies
  steps_period.pickle      no time_us, no optimizer frames: setup, a loop
                           over 3 layers inside each of 6 iterations, an
                           eval tail; only the repeat period finds steps
  steps_norepeat.pickle    no stack, action and size recurs: no steps

    python3 gen_steps.py OUTDIR
"""
import os
import pickle
import random
import sys

from snapgen import fr, segment

MiB = 1 << 20
BASE = 0x7F4000000000
SEG = 1 << 30
T0 = 1_710_000_000_000_000


MAIN = ("/job/train.py", 120, "main")
PARAM = fr(("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1326, "convert"), MAIN)
INPUT = fr(("/job/train.py", 55, "train_step"), MAIN)
LAYER = fr(("/venv/lib/python3.11/site-packages/torch/nn/functional.py", 2140, "gelu"),
           ("/job/model.py", 40, "Block.forward"), ("/job/model.py", 90, "Model.forward"),
           ("/job/train.py", 57, "train_step"), MAIN)
LOSS = fr(("/venv/lib/python3.11/site-packages/torch/nn/functional.py", 3479, "cross_entropy"),
          ("/job/train.py", 58, "train_step"), MAIN)
GRAD = fr(("/venv/lib/python3.11/site-packages/torch/autograd/graph.py", 825, "_engine_run_backward"),
          ("/job/train.py", 59, "train_step"), MAIN)
OPT = ("/venv/lib/python3.11/site-packages/torch/optim/optimizer.py", 493, "wrapper")
ADAM_STATE = fr(("/venv/lib/python3.11/site-packages/torch/optim/adamw.py", 137, "_init_group"),
                ("/venv/lib/python3.11/site-packages/torch/optim/adamw.py", 220, "step"), OPT,
                ("/job/train.py", 60, "train_step"), MAIN)
ADAM_TMP = fr(("/venv/lib/python3.11/site-packages/torch/optim/adamw.py", 576, "_multi_tensor_adamw"),
              ("/venv/lib/python3.11/site-packages/torch/optim/adamw.py", 220, "step"), OPT,
              ("/job/train.py", 60, "train_step"), MAIN)
ADAM_NOSTEP = fr(("/job/myadam.py", 30, "update"), ("/job/train.py", 60, "train_step"), MAIN)
SCHED = fr(("/venv/lib/python3.11/site-packages/torch/optim/lr_scheduler.py", 180, "step"),
           ("/job/train.py", 61, "train_step"), MAIN)
LEAK = fr(("/job/train.py", 71, "log_hidden_states"), ("/job/train.py", 62, "train_step"), MAIN)
EVAL = fr(("/job/eval.py", 12, "evaluate"), MAIN)


class Trace:
    def __init__(self, timed):
        self.timed, self.t, self.next = timed, T0, BASE
        self.trace, self.anns, self.live = [], [], {}
        self.ev("segment_alloc", BASE, SEG, PARAM)

    def ev(self, action, addr, size, frames):
        self.t += 7
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames}
        if self.timed:
            e["time_us"] = self.t
        self.trace.append(e)

    def alloc(self, size, frames):
        a = self.next
        self.next += size
        assert self.next <= BASE + SEG
        self.ev("alloc", a, size, frames)
        self.live[a] = (size, frames)
        return a

    def free(self, a):
        size, frames = self.live.pop(a)
        self.ev("free_requested", a, size, frames)
        self.ev("free_completed", a, size, frames)

    def ann(self, name, stage):
        self.t += 7
        self.anns.append({"name": name, "stage": stage, "device": 0, "time_us": self.t})

    def snapshot(self, torch_npu=False):
        seg = segment(self.live, BASE, SEG, PARAM)
        out = {"segments": [seg], "device_traces": [self.trace]}
        if not torch_npu:
            out["external_annotations"] = self.anns
        return out


def iteration(tr, n, layers=1, batch=4, optimizer=ADAM_TMP, annotate=False):
    x = tr.alloc(batch * MiB, INPUT)
    acts = [tr.alloc(2 * batch * MiB, LAYER) for _ in range(layers)]
    loss = tr.alloc(512 * 1024, LOSS)
    grads = [tr.alloc(2 * MiB, GRAD) for _ in range(2)]
    for a in reversed(acts):
        tr.free(a)
    tr.free(loss)
    tr.free(x)
    if annotate:
        tr.ann("Optimizer.step#AdamW.step", "START")
    if n == 0 and optimizer is ADAM_TMP:
        for _ in range(4):
            tr.alloc(2 * MiB, ADAM_STATE)
    tmp = tr.alloc(1 * MiB, optimizer)
    tr.free(tmp)
    if annotate:
        tr.ann("Optimizer.step#AdamW.step", "END")
    tr.alloc(1 * MiB, LEAK)
    for g in grads:
        tr.free(g)


def setup(tr):
    for _ in range(3):
        tr.alloc(4 * MiB, PARAM)


def annotation():
    tr = Trace(timed=True)
    setup(tr)
    for n in range(5):
        iteration(tr, n, annotate=True)
    return tr.snapshot()


def optimizer():
    tr = Trace(timed=False)
    setup(tr)
    for n, batch in enumerate([4, 3, 5, 2]):
        iteration(tr, n, batch=batch)
        s = tr.alloc(512, SCHED)  # the scheduler's step is not the optimizer's
        tr.free(s)
    return tr.snapshot(torch_npu=True)


def period():
    tr = Trace(timed=False)
    setup(tr)
    for n in range(6):
        iteration(tr, n, layers=3, optimizer=ADAM_NOSTEP)
    e = tr.alloc(3 * MiB, EVAL)
    tr.free(e)
    return tr.snapshot(torch_npu=True)


def norepeat():
    tr = Trace(timed=False)
    rng = random.Random(7)
    held = []
    for i in range(60):
        frames = fr(("/job/work.py", 10 + i, "work_%d" % i), MAIN)
        held.append(tr.alloc(rng.randrange(1, 64) * 4096 + i * 512, frames))
        if len(held) > 3:
            tr.free(held.pop(rng.randrange(len(held))))
    return tr.snapshot(torch_npu=True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, build in (("annotation", annotation), ("optimizer", optimizer), ("period", period),
                        ("norepeat", norepeat)):
        with open(os.path.join(out, "steps_%s.pickle" % name), "wb") as f:
            pickle.dump(build(), f, protocol=4)


if __name__ == "__main__":
    main()
