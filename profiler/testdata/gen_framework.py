#!/usr/bin/env python3
"""Independent producer of torch_npu FRAMEWORK test directories.

Writes the raw profiler files exactly as docs/reference/profiler-format.md §2
lays them out (the same struct strings torch_npu's own decoders and unit tests
use), using only Python's struct and json modules — never npumon's encoder.
Beside each directory it writes expected.json: every record as the producer
built it, plus its epoch-ns time computed with torch_npu's formula
(docs/reference/profiler-format.md §3.2).

Run from this directory:  python3 gen_framework.py
"""
import json
import os
import struct

OP_RANGE_FMT = "<3q4QB?"      # 58 bytes
OP_MARK_FMT = "<q4Q"          # 40 bytes
MEMORY_FMT = "<7q2b3B2Q"      # 77 bytes
PYFUNC_FMT = "<4QB"           # 33 bytes
GC_FMT = "<3Q"                # 24 bytes
assert struct.calcsize(OP_RANGE_FMT) == 58
assert struct.calcsize(OP_MARK_FMT) == 40
assert struct.calcsize(MEMORY_FMT) == 77


def tlv(t, payload):
    return struct.pack("<HI", t, len(payload)) + payload


def field(fid, s):
    b = s if isinstance(s, bytes) else s.encode("utf-8")
    return tlv(fid, b)


OP_FIELDS = [("name", 2), ("input_dtypes", 3), ("input_shapes", 4), ("input_tensors", 5),
             ("input_tensorlists", 6), ("input_scalars", 7), ("stack", 8), ("module", 9),
             ("extra_args", 10)]


def op_range(r):
    v = struct.pack(OP_RANGE_FMT, r["start"], r["end"], r["seq"], r["pid"], r["start_tid"],
                    r["end_tid"], r["fwd_tid"], r["scope"], r["async"])
    for key, fid in OP_FIELDS:
        if key in r:
            v += field(fid, r[key])
    return tlv(1, v)


def op_mark(r):
    v = struct.pack(OP_MARK_FMT, r["time"], r["category"], r["corr"], r["tid"], r["pid"])
    return tlv(2, v + field(1, r["name"]))


def memory(r):
    v = struct.pack(MEMORY_FMT, r["ptr"], r["time"], r["alloc_size"], r["allocated"],
                    r["reserved"], r["active"], r["stream"], r["device_type"], r["device_index"],
                    r["component"], r["data_type"], r["allocator_type"], r["tid"], r["pid"])
    return tlv(3, v)


PID, TID, BWD_TID, Q_TID = 4242, 4242, 4300, 4301
MiB = 1 << 20


def build_records(t0):
    """A small training-like run: 3 steps of fwd/bwd ops with memory events."""
    ops, marks, mems = [], [], []
    t = t0
    allocated, reserved, active = 0, 0, 0
    ptr_base = 0x12C000000000
    live = []
    seq = 0
    corr = 1
    for step in range(3):
        step_start = t
        t += 1000
        for i, name in enumerate(["aten::empty", "aten::add", "aten::mul", "aten::matmul"]):
            s = t
            t += 1500 + 137 * i
            # one allocation inside each op
            size = (i + 1) * 512 * 1024
            ptr = ptr_base + (step * 16 + i) * 4 * MiB
            allocated += size
            active += size
            if allocated > reserved:
                reserved += 20 * MiB
            mems.append(dict(ptr=ptr, time=s + 200, alloc_size=size, allocated=allocated,
                             reserved=reserved, active=active, stream=3, device_type=20,
                             device_index=0, component=0, data_type=0, allocator_type=0,
                             tid=TID, pid=PID))
            live.append((ptr, size))
            e = t
            t += 100
            r = dict(start=s, end=e, seq=seq, pid=PID, start_tid=TID, end_tid=TID, fwd_tid=0,
                     scope=0, **{"async": False}, name=name,
                     input_dtypes="float;float", input_shapes="2,3;2,3",
                     stack="train.py(%d): forward;train.py(10): main" % (20 + i),
                     module="nn.Module: Net;nn.Module: Linear_%d" % i)
            if name == "aten::matmul":
                r["extra_args"] = "flops:1234"
            ops.append(r)
            # task-queue marks for this op
            marks.append(dict(time=s + 10, category=0, corr=corr, tid=TID, pid=PID, name=name))
            marks.append(dict(time=s + 60, category=1, corr=corr, tid=TID, pid=PID, name=name))
            marks.append(dict(time=s + 80, category=2, corr=corr, tid=Q_TID, pid=PID, name=name))
            marks.append(dict(time=s + 400, category=3, corr=corr, tid=Q_TID, pid=PID, name=name))
            corr += 1
            seq += 1
        # backward op on another thread, linked to the forward thread
        s = t
        t += 2500
        ops.append(dict(start=s, end=t, seq=seq - 1, pid=PID, start_tid=BWD_TID, end_tid=BWD_TID,
                        fwd_tid=TID, scope=1, **{"async": False}, name="MulBackward0"))
        t += 100
        # free everything allocated in this step: FREE then BLOCK_FREE
        for ptr, size in live:
            allocated -= size
            mems.append(dict(ptr=ptr, time=t, alloc_size=-size, allocated=allocated,
                             reserved=reserved, active=active, stream=3, device_type=20,
                             device_index=0, component=0, data_type=1, allocator_type=0,
                             tid=TID, pid=PID))
            t += 10
            active -= size
            mems.append(dict(ptr=ptr, time=t, alloc_size=-size, allocated=allocated,
                             reserved=reserved, active=active, stream=3, device_type=20,
                             device_index=0, component=0, data_type=2, allocator_type=0,
                             tid=TID, pid=PID))
            t += 10
        live = []
        t += 300
        ops.append(dict(start=step_start, end=t, seq=-1, pid=PID, start_tid=TID, end_tid=TID,
                        fwd_tid=0, scope=7, **{"async": False}, name="ProfilerStep#%d" % (step + 1)))
        t += 50
    # a workspace allocator record on device 1 and a CPU record (not an NPU row)
    mems.append(dict(ptr=0x1000, time=t, alloc_size=4096, allocated=4096, reserved=2 * MiB,
                     active=4096, stream=-1, device_type=20, device_index=1, component=1,
                     data_type=0, allocator_type=0, tid=TID, pid=PID))
    mems.append(dict(ptr=0x2000, time=t + 5, alloc_size=64, allocated=64, reserved=0, active=0,
                     stream=0, device_type=0, device_index=-1, component=0, data_type=0,
                     allocator_type=0, tid=TID, pid=PID))
    # unicode name and an async user scope
    ops.append(dict(start=t + 10, end=t + 20, seq=-1, pid=PID, start_tid=TID, end_tid=TID,
                    fwd_tid=0, scope=7, **{"async": True}, name="用户::范围"))
    return ops, marks, mems, t + 100


def to_epoch(raw, info, host=None):
    """torch_npu _profiler_config.py: PROF_*/host files take priority
    (docs/reference/profiler-format.md §3.2)."""
    si = info["start_info"]
    freq, start_cnt, start_mono = si["freq"], si["start_cnt"], si["start_monotonic"]
    if host:
        freq = float(host["freq"])
        start_cnt, start_mono = host["cntvct"], host["clock_monotonic_raw"]
    if si["syscnt_enable"]:
        mono = int((raw - start_cnt) * 1000 / freq) + start_mono
    else:
        mono = raw
    if host:
        diff = int(host["collectionTimeBegin"]) * 1000 - int(host["clockMonotonicRaw"])
    else:
        ei = info["end_info"]
        diff = ei["collectionTimeEnd"] - ei["MonotonicTimeEnd"]
    return mono + diff


def write_host(d, host):
    """CANN PROF_*/host files: info.json (CPU frequency), host_start.log, start_info."""
    h = os.path.join(d, "PROF_000001_20261129120000789_FKFLNPEPPRRCFCBA", "host")
    os.makedirs(h, exist_ok=True)
    with open(os.path.join(h, "info.json"), "w") as f:
        json.dump({"CPU": [{"Id": 0, "Frequency": host["freq"]}], "hostname": "gen"}, f)
    with open(os.path.join(h, "host_start.log"), "w") as f:
        f.write("[Host]\nclock_monotonic_raw: %d\ncntvct: %d\ncntvct_diff: 0\n" % (host["clock_monotonic_raw"], host["cntvct"]))
    with open(os.path.join(h, "start_info"), "w") as f:
        json.dump({"collectionDateBegin": "x", "collectionTimeBegin": host["collectionTimeBegin"],
                   "clockMonotonicRaw": host["clockMonotonicRaw"]}, f)


def write_dir(root, name, info, t0, host=None):
    d = os.path.join(root, name)
    fw = os.path.join(d, "FRAMEWORK")
    os.makedirs(fw, exist_ok=True)
    if host:
        write_host(d, host)
    ops, marks, mems, tend = build_records(t0)
    data = b"".join(op_range(r) for r in ops)
    # an envelope shorter than the constant block: torch_npu skips it
    data += tlv(1, b"\x00" * 20)
    with open(os.path.join(fw, "torch.op_range"), "wb") as f:
        f.write(data)
    with open(os.path.join(fw, "torch.op_mark"), "wb") as f:
        f.write(b"".join(op_mark(r) for r in marks))
    with open(os.path.join(fw, "torch.memory_usage"), "wb") as f:
        f.write(b"".join(memory(r) for r in mems))
    gcs = [(PID, t0 + 5000, t0 + 9000), (PID, tend - 50, tend - 10)]
    with open(os.path.join(fw, "torch.gc_record"), "wb") as f:
        # plus a trailing 7-byte fragment that fixed-size decoding ignores
        f.write(b"".join(struct.pack(GC_FMT, *g) for g in gcs) + b"\x01" * 7)
    funcs = [(t0 + 1, TID, PID, 77, 0), (t0 + 2, TID, PID, 77, 1)]
    with open(os.path.join(fw, "torch.python_tracer_func"), "wb") as f:
        f.write(b"".join(struct.pack(PYFUNC_FMT, *p) for p in funcs))
    hashes = [(77, "train.py(20): forward"), (78, b"\xff\xfe bad utf8")]
    with open(os.path.join(fw, "torch.python_tracer_hash"), "wb") as f:
        f.write(b"".join(tlv(4, struct.pack("<Q", k) + field(1, s)) for k, s in hashes))
    params = [(9, 1, "weight)t0)g0}")]
    with open(os.path.join(fw, "torch.param_tensor_info"), "wb") as f:
        f.write(b"".join(tlv(5, struct.pack("<Q", k) + field(fid, s)) for k, fid, s in params))
    with open(os.path.join(d, "profiler_info.json"), "w") as f:
        json.dump(info, f, indent=4)
    expected = {
        "op_range": [dict(r, epoch_start=to_epoch(r["start"], info, host), epoch_end=to_epoch(r["end"], info, host)) for r in ops],
        "op_mark": [dict(r, epoch=to_epoch(r["time"], info, host)) for r in marks],
        "memory_usage": [dict(r, epoch=to_epoch(r["time"], info, host)) for r in mems],
        "gc_record": [dict(pid=g[0], start=g[1], end=g[2]) for g in gcs],
        "python_tracer_func": [dict(time=p[0], tid=p[1], pid=p[2], key=p[3], tag=p[4]) for p in funcs],
        "python_tracer_hash": [dict(key=k, value=s if isinstance(s, str) else "N/A") for k, s in hashes],
        "param_tensor_info": [dict(key=k, module=s) for k, _, s in params],
        "skipped": 1,
    }
    with open(os.path.join(root, name + ".expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)


def info(syscnt, **start):
    base = {"syscnt_enable": syscnt, "freq": start.get("freq", 100.0),
            "start_cnt": start.get("start_cnt", 0), "start_monotonic": start.get("start_monotonic", 0)}
    return {
        "config": {"common_config": {"activities": ["ProfilerActivity.CPU"],
                                     "schedule": {"wait": 0, "active": 3, "warmup": 0, "repeat": 1,
                                                  "skip_first": 0, "skip_first_wait": 0},
                                     "record_shapes": True, "profile_memory": True,
                                     "with_stack": True, "with_flops": False, "with_modules": True},
                   "experimental_config": {"_profiler_level": "Level0"}},
        "start_info": base,
        "end_info": {"collectionTimeEnd": 1764400000123456789, "MonotonicTimeEnd": 86400000000000},
        "torch_npu_version": "2.5.1", "cann_version": "8.0.0",
    }


if __name__ == "__main__":
    root = "framework"
    # CLOCK_MONOTONIC_RAW ns raw clock (syscnt disabled)
    write_dir(root, "gen_4242_20261129120000123_ascend_pt", info(False), 86399000000000)
    # system counter at 50 MHz: raw = counter ticks
    write_dir(root, "syscnt_4242_20261129120000456_ascend_pt",
              info(True, freq=50.0, start_cnt=4319900000000, start_monotonic=86398000000000),
              4319950000000)
    # system counter with CANN host files overriding freq, start and the epoch offset
    write_dir(root, "cann_4242_20261129120000789_ascend_pt",
              info(True, freq=50.0, start_cnt=1, start_monotonic=1),
              4319950000000,
              host={"freq": "25.000000", "cntvct": 4319900000000, "clock_monotonic_raw": 86398000000000,
                    "collectionTimeBegin": "1764399000123456", "clockMonotonicRaw": "86398000001000"})
