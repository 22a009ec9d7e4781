#!/usr/bin/env python3
"""Generate snapshots with very many steps for explain's walk (Python's
pickle): a program that does the same thing over and over while it keeps
thousands of blocks live, as an inference server does. Every iteration is
a step (the repeat period finds them, or Optimizer.step annotations mark
them); explain stops at every step end.

    python3 gen_manysteps.py OUT.pickle ITERATIONS LIVE TEMPS [--plain] [--leak] [--timed] [--annotate] [--enclose] [--oom]

LIVE blocks of distinct sizes are allocated once (setup: never freed);
each iteration allocates and frees TEMPS blocks (TEMPS 1: one alloc /
free_requested / free_completed, a period of one allocation), replaces
one of 64 cached blocks (allocated 64 iterations earlier, freed now;
not with --plain) and,
with --leak, keeps one more 512-byte block from a LEAK call site (a leak
suspect spanning every step). --timed gives entries time_us,
--annotate (implies --timed) an Optimizer.step#… range per iteration,
--enclose (implies --annotate) one "train" range around all iterations,
--oom an oom entry three quarters in.
"""
import pickle
import sys

from snapgen import fr, segment

BASE = 0x7F4000000000
SEG = 1 << 40
T0 = 1_710_000_000_000_000

MAIN = ("/srv/serve.py", 10, "main")
SETUP = fr(("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1326, "convert"),
           ("/srv/serve.py", 20, "load"), MAIN)
TEMP = [fr(("/srv/model.py", 100 + k, "layer%d" % k), ("/srv/serve.py", 30, "handle"), MAIN) for k in range(16)]
CACHE = fr(("/srv/cache.py", 40, "put"), ("/srv/serve.py", 31, "handle"), MAIN)
LEAK = fr(("/srv/serve.py", 44, "log_request"), ("/srv/serve.py", 32, "handle"), MAIN)


def main():
    flags = {a for a in sys.argv[1:] if a.startswith("--")}
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out, iters, nlive, temps = args[0], int(args[1]), int(args[2]), int(args[3])
    if "--enclose" in flags:
        flags.add("--annotate")
    timed = "--timed" in flags or "--annotate" in flags
    trace, anns, live = [], [], {}
    st = {"t": T0, "next": BASE}

    def ev(action, addr, size, frames):
        st["t"] += 3
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "frames": frames}
        if timed:
            e["time_us"] = st["t"]
        trace.append(e)

    def bump(size):
        a = st["next"]
        st["next"] += (size + 511) // 512 * 512
        return a

    def alloc(addr, size, frames):
        ev("alloc", addr, size, frames)
        live[addr] = (size, frames)

    def free(addr):
        size, frames = live.pop(addr)
        ev("free_requested", addr, size, frames)
        ev("free_completed", addr, size, frames)

    ev("segment_alloc", BASE, SEG, SETUP)
    for i in range(nlive):
        size = 512 * (i + 1)
        alloc(bump(size), size, SETUP)
    temp_addr = [bump(1 << 20) for _ in range(temps)]
    cache_addr = [bump(1 << 16) for _ in range(64)]
    cached = []
    if "--enclose" in flags:
        st["t"] += 1
        anns.append({"name": "train", "stage": "START", "device": 0, "time_us": st["t"]})
    for n in range(iters):
        if "--annotate" in flags:
            st["t"] += 1
            anns.append({"name": "Optimizer.step#Serve.step", "stage": "START", "device": 0, "time_us": st["t"]})
        for k in range(temps):
            alloc(temp_addr[k], 4096 * (k + 1), TEMP[k % len(TEMP)])
        for k in range(temps):
            free(temp_addr[k])
        if "--plain" not in flags:
            if len(cached) == 64:
                free(cached.pop(0))
            a = cache_addr[n % 64]
            alloc(a, 1 << 16, CACHE)
            cached.append(a)
        if "--leak" in flags:
            alloc(bump(512), 512, LEAK)
        if "--oom" in flags and n == 3 * iters // 4:
            st["t"] += 1
            e = {"action": "oom", "addr": 0, "size": 1 << 41, "stream": 0, "device_free": 1 << 30, "frames": TEMP[0]}
            if timed:
                e["time_us"] = st["t"]
            trace.append(e)
        if "--annotate" in flags:
            st["t"] += 1
            anns.append({"name": "Optimizer.step#Serve.step", "stage": "END", "device": 0, "time_us": st["t"]})
    if "--enclose" in flags:
        st["t"] += 1
        anns.append({"name": "train", "stage": "END", "device": 0, "time_us": st["t"]})
    snap = {"segments": [segment(live, BASE, SEG, SETUP)], "device_traces": [trace]}
    if anns:
        snap["external_annotations"] = anns
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
