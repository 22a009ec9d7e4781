"""A "training job" on the stand-in allocator, for the producer's tests.

Run it as a real job would be: python -m npumon_producer train_standin.py ...
It loads a recorded snapshot into the stand-in torch / torch_npu, lets its
trace happen in steps while the producer polls, and reports on stdout, one
JSON object a line: {"ready": pid} once the producer serves, {"done": ...}
at the end (after npumon_producer.stop()).
"""

import argparse
import json
import os
import pickle
import sys
import time

import npumon_standin


def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            say(error="timed out waiting for " + what)
            sys.exit(3)
        time.sleep(0.005)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--cuda", action="store_true", help="stand in for torch.cuda instead of torch_npu")
    ap.add_argument("--steps", type=int, default=8, help="the trace happens in this many steps")
    ap.add_argument("--step-sleep", type=float, default=0.03)
    ap.add_argument("--manual", action="store_true", help="poll right after each step (deterministic)")
    ap.add_argument("--race", type=int, default=0, help="entries happening inside every _snapshot() call")
    ap.add_argument("--clients", type=int, default=0, help="wait for this many clients before the first step")
    ap.add_argument("--hold", type=float, default=0, help="sleep this long after the last step")
    ap.add_argument("--hold-file", help="after the last step, wait for this file to exist")
    ap.add_argument("--dump", help="write the last snapshot _snapshot() returned here")
    a = ap.parse_args()

    if a.cuda:
        import torch  # noqa: F401  (the stand-in)
    else:
        import torch_npu  # noqa: F401
    import npumon_producer

    with open(a.fixture, "rb") as f:
        final = pickle.load(f)
    alloc = npumon_standin.Allocator(final, npu=not a.cuda)
    alloc.race = a.race
    if a.cuda and not alloc.has_time:
        sys.modules["torch"].__version__ = "2.0.1+standin"  # before time_us existed
    npumon_standin.current = alloc  # the job initialises its device
    st = npumon_producer.stats
    wait(lambda: st().get("serving") or st().get("errors"), 60, "the producer")
    if not st().get("serving"):
        # the producer could not start (e.g. another one serves there): the job goes on
        say(refused=os.getpid(), stats=st())
        return
    say(ready=os.getpid(), socket=st().get("socket"))
    if a.clients:
        wait(lambda: st().get("clients", 0) >= a.clients, 60, "clients")
        say(clients=st().get("clients"))
    work = 0.0  # the steps' own time (sleeps left out): what a neighbour could slow
    for d in range(alloc.ndev):
        total = alloc.remaining(d)
        step = max(1, -(-total // max(1, a.steps)))
        while alloc.remaining(d) > 0:
            t0 = time.perf_counter()
            alloc.advance(step, d)
            work += time.perf_counter() - t0
            if a.manual:
                npumon_producer.poll()
            else:
                time.sleep(a.step_sleep)
    if a.hold:
        say(holding=True)
        time.sleep(a.hold)
    if a.hold_file:
        say(holding=True)
        wait(lambda: os.path.exists(a.hold_file), 60, a.hold_file)
    prod = npumon_producer.start()  # the running producer (the first start wins)
    npumon_producer.stop()
    if a.dump and alloc.last is not None:
        with open(a.dump + ".tmp", "wb") as f:
            pickle.dump(alloc.last, f, protocol=4)
        os.replace(a.dump + ".tmp", a.dump)
    say(done=True, step_work_s=work, snapshots=alloc.calls, workspace=[len(w) for w in alloc.workspace], stats=prod.stats())


if __name__ == "__main__":
    main()
