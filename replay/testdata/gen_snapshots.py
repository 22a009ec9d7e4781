#!/usr/bin/env python3
"""Generate the snapshot variants no public file provides, with Python's own
pickle / json / struct (an independent producer, not npumon's encoder).

    python3 gen_snapshots.py OUTDIR

Writes, per docs/reference/snapshot-format.md:
  torch113_list.pickle / .json   torch 1.13 bare list of segments, block history (protocol 3)
  npu_workspace.pickle           torch_npu: workspace_snapshot triples first, no time_us,
                                 non-zero aclrtStream handles, pool ids, oom, snapshot entry
  cuda21_p2/p3/p4/p5.pickle      torch 2.x dict (time_us, compile_context, user_metadata,
                                 allocator_settings, external_annotations, user_defined,
                                 annotate, an unknown action, shared frames) at protocols 2–5
  cuda21.json                    the same dict as JSON (pool ids as 2-arrays)
  wide_addr.pickle               addresses >= 2**63 (9-byte LONG1), fit uint64
  bad_*.pickle                   hostile or broken input the decoder must refuse cleanly
"""
import io
import json
import os
import pickle
import struct
import sys
from collections import OrderedDict

MiB = 1 << 20


def frames(*names):
    return [{"filename": "/srv/train/%s.py" % n, "line": 10 + i, "name": n} for i, n in enumerate(names)]


# Shared stacks: the same list object is referenced many times, so pickle
# writes it once and BINGETs it afterwards (as torch's symbolizer does).
STACK_A = frames("matmul", "forward", "step")
STACK_B = frames("embedding", "forward", "step")
STACK_C = [{"name": "START", "filename": "ProfilerStep#1", "line": 0}]


def cuda21():
    """A 2.x snapshot, device 0 with history, device 1 empty trace."""
    base0 = 0x7F0000000000
    seg0 = base0
    seg1 = base0 + 20 * MiB
    t = 1_700_000_000_000_000
    trace = []

    def ev(action, addr, size, fr=None, **kw):
        nonlocal t
        t += 7
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
             "compile_context": "N/A", "user_metadata": ""}
        if fr is not None:
            e["frames"] = fr
        e.update(kw)
        trace.append(e)

    ev("segment_alloc", seg0, 20 * MiB, STACK_A)
    ev("alloc", seg0, 3 * MiB, STACK_A)                      # lives to the end
    ev("alloc", seg0 + 3 * MiB, 5 * MiB - 100, STACK_B)      # freed below
    ev("user_defined", 0, 0, STACK_C)
    ev("free_requested", seg0 + 3 * MiB, 5 * MiB - 100, STACK_B)
    ev("free_completed", seg0 + 3 * MiB, 5 * MiB - 100, STACK_B)
    ev("segment_alloc", seg1, 2 * MiB, STACK_B)
    ev("alloc", seg1, 512, STACK_B, user_metadata="tagged")
    ev("annotate", seg1, 512, STACK_B, user_metadata="kv-cache")
    ev("mystery_action", 0, 0)                               # unknown: kept, no effect
    ev("free_requested", seg1 + 4096, 1000, STACK_A)         # allocated before the trace
    ev("free_completed", seg1 + 4096, 1000, STACK_A)
    ev("alloc", seg0 + 8 * MiB, 4 * MiB, STACK_A)            # pending free at the end
    ev("free_requested", seg0 + 8 * MiB, 4 * MiB, STACK_A)
    ev("oom", 0, 64 * MiB, None, device_free=1234)
    del trace[-1]["addr"]
    ev("snapshot", 0, 3 * MiB + 512 + 4 * MiB + 777)

    segments = [
        {"device": 0, "address": seg0, "total_size": 20 * MiB, "allocated_size": 3 * MiB + 1024,
         "active_size": 7 * MiB + 1024, "requested_size": 7 * MiB + 777, "stream": 0,
         "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": STACK_A,
         "blocks": [
             {"address": seg0, "size": 3 * MiB, "requested_size": 3 * MiB, "state": "active_allocated", "frames": STACK_A},
             {"address": seg0 + 3 * MiB, "size": 5 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
             {"address": seg0 + 8 * MiB, "size": 4 * MiB, "requested_size": 4 * MiB, "state": "active_pending_free", "frames": STACK_A},
             {"address": seg0 + 12 * MiB, "size": 1024, "requested_size": 777, "state": "active_allocated", "frames": []},  # ghost
             {"address": seg0 + 12 * MiB + 1024, "size": 8 * MiB - 1024, "requested_size": 0, "state": "inactive", "frames": []},
         ]},
        {"device": 0, "address": seg1, "total_size": 2 * MiB, "allocated_size": 512, "active_size": 512,
         "requested_size": 512, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": STACK_B,
         "blocks": [
             {"address": seg1, "size": 512, "requested_size": 512, "state": "active_allocated", "frames": STACK_B},
             {"address": seg1 + 512, "size": 2 * MiB - 512, "requested_size": 0, "state": "inactive", "frames": []},
         ]},
        {"device": 1, "address": 0x7F8000000000, "total_size": 2 * MiB, "allocated_size": 0, "active_size": 0,
         "requested_size": 0, "stream": 0, "segment_type": "small", "segment_pool_id": (1, 3),
         "is_expandable": True, "frames": [],
         "blocks": [{"address": 0x7F8000000000, "size": 2 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
                "garbage_collection_threshold": 0.6, "expandable_segments": True,
                "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False, "graph_capture_record_stream_reuse": False,
                "roundup_power2_divisions": {str(1 << i): (4 if i == 3 else 0) for i in range(16)}}
    anns = [{"name": "ProfilerStep#1", "stage": "START", "device": 0, "time_us": 1_700_000_000_000_010},
            {"name": "ProfilerStep#1", "stage": "END", "device": 0, "time_us": 1_700_000_000_000_090}]
    return {"segments": segments, "device_traces": [trace, []], "allocator_settings": settings,
            "external_annotations": anns}


def npu():
    """torch_npu: workspace blocks appended to segments, their triples first in the trace."""
    stream = 0xAAAAE3C01230
    ws = 0x12C0C0000000
    base = 0x12C0E0000000
    trace = []

    def ev(action, addr, size, fr=None, pool=(0, 0)):
        e = {"action": action, "addr": addr, "size": size, "stream": stream, "pool_id": pool}
        if fr is not None:
            e["frames"] = fr
        trace.append(e)

    ev("workspace_snapshot", ws, 8 * MiB, STACK_A)
    ev("segment_alloc", ws, 8 * MiB, STACK_A)
    ev("alloc", ws, 8 * MiB, STACK_A)
    ev("segment_alloc", base, 20 * MiB, STACK_B)
    # torch_npu pads every request by 32 bytes before rounding: a 6 MiB block
    # is a request of 6 MiB - 32.
    ev("alloc", base, 6 * MiB - 32, STACK_B)
    ev("alloc", base + 6 * MiB, 2 * MiB - 32, STACK_A)
    ev("free_requested", base, 6 * MiB - 32, STACK_B)
    ev("free_completed", base, 6 * MiB - 32, STACK_B)
    ev("segment_map", base + 20 * MiB, 2 * MiB)
    ev("segment_unmap", base + 20 * MiB, 2 * MiB)
    ev("oom", 0, 40 * MiB)
    trace[-1]["device_free"] = 1 * MiB
    del trace[-1]["addr"]
    ev("snapshot", 0, 10 * MiB)
    segments = [
        {"device": 0, "address": ws, "total_size": 8 * MiB, "allocated_size": 8 * MiB, "active_size": 8 * MiB,
         "requested_size": 8 * MiB, "stream": stream, "segment_pool_id": (0, 0), "segment_type": "large",
         "is_expandable": False, "frames": STACK_A,
         "blocks": [{"address": ws, "size": 8 * MiB, "requested_size": 8 * MiB, "state": "active_allocated", "frames": STACK_A}]},
        {"device": 0, "address": base, "total_size": 20 * MiB, "allocated_size": 2 * MiB, "active_size": 2 * MiB,
         "requested_size": 2 * MiB - 32, "stream": stream, "segment_pool_id": (0, 0), "segment_type": "large",
         "is_expandable": False, "frames": STACK_B,
         "blocks": [{"address": base, "size": 6 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
                    {"address": base + 6 * MiB, "size": 2 * MiB, "requested_size": 2 * MiB - 32, "state": "active_allocated", "frames": STACK_A},
                    {"address": base + 8 * MiB, "size": 12 * MiB, "requested_size": 0, "state": "inactive", "frames": []}]},
    ]
    return {"segments": segments, "device_traces": [trace]}


def torch113():
    """torch 1.13 _snapshot(): a list of segments; blocks have size, state, history."""
    a = 0x7F5500000000
    hist = lambda addr, n, fr: [{"addr": addr, "real_size": n, "frames": fr}]
    return [
        {"device": 0, "address": a, "total_size": 20 * MiB, "allocated_size": 12 * MiB, "active_size": 12 * MiB,
         "stream": 0, "segment_type": "large",
         "blocks": [{"size": 8 * MiB, "state": "active_allocated", "history": hist(a, 8 * MiB - 10, STACK_A)},
                    {"size": 4 * MiB, "state": "active_allocated", "history": hist(a + 8 * MiB, 4 * MiB, [])},
                    {"size": 8 * MiB, "state": "inactive", "history": hist(a + 12 * MiB, 1 * MiB, STACK_B)}]},
        {"device": 0, "address": a + 64 * MiB, "total_size": 2 * MiB, "allocated_size": 0, "active_size": 512,
         "stream": 0, "segment_type": "small",
         "blocks": [{"size": 512, "state": "active_pending_free"},
                    {"size": 2 * MiB - 512, "state": "inactive"}]},
    ]


def wide():
    s = npu()
    hi = (1 << 63) + 0x1000
    for seg in s["segments"]:
        seg["address"] += hi - 0x12C0C0000000
        for b in seg["blocks"]:
            b["address"] += hi - 0x12C0C0000000
    for e in s["device_traces"][0]:
        if e.get("addr"):
            e["addr"] += hi - 0x12C0C0000000
    return s


def torchscript_pickle(obj):
    """Opcodes as TorchScript's C++ Pickler writes them (torch/csrc/jit/serialization/
    pickler.cpp, protocol 2, tag_aggregates=false): BINUNICODE strings memoized with
    BINPUT and repeated with BINGET / LONG_BINGET, every container memoized with BINPUT,
    tuples as MARK ... TUPLE, ints beyond 32 bits as an 8-byte LONG1. Encoded here with
    struct, so the byte stream does not come from Python's pickler either."""
    out = bytearray(b"\x80\x02")
    memo = {"n": 0}
    strings = {}

    def put():
        i = memo["n"]
        memo["n"] += 1
        out.extend(b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i))

    def emit(v):
        if isinstance(v, bool):
            out.extend(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            if 0 <= v < 256:
                out.extend(b"K" + bytes([v]))
            elif 0 <= v < 65536:
                out.extend(b"M" + struct.pack("<H", v))
            elif -(1 << 31) <= v < (1 << 31):
                out.extend(b"J" + struct.pack("<i", v))
            else:
                out.extend(b"\x8a\x08" + struct.pack("<q", v))
        elif isinstance(v, float):
            out.extend(b"G" + struct.pack(">d", v))
        elif isinstance(v, str):
            if v in strings:
                i = strings[v]
                out.extend(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))
            else:
                data = v.encode()
                out.extend(b"X" + struct.pack("<I", len(data)) + data)
                strings[v] = memo["n"]
                put()
        elif isinstance(v, tuple):
            out.extend(b"(")
            for x in v:
                emit(x)
            out.extend(b"t")
            put()
        elif isinstance(v, list):
            out.extend(b"]")
            put()
            out.extend(b"(")
            for x in v:
                emit(x)
            out.extend(b"e")
        elif isinstance(v, dict):
            out.extend(b"}")
            put()
            out.extend(b"(")
            for k, x in v.items():
                emit(k)
                emit(x)
            out.extend(b"u")
        else:
            raise TypeError(type(v))

    emit(obj)
    out.extend(b".")
    return bytes(out)


def to_json(obj):
    return json.dumps(obj, indent=1).encode()


def hostile():
    """Crafted byte streams (struct, not pickle) for the refusal tests."""
    p4 = b"\x80\x04"
    out = {}
    out["bad_global.pickle"] = pickle.dumps({"segments": [], "x": OrderedDict(a=1)}, protocol=4)
    out["bad_reduce.pickle"] = p4 + b"]\x94(K\x01K\x02e\x85R."                          # REDUCE without GLOBAL
    out["bad_huge_string.pickle"] = p4 + b"\x8d" + struct.pack("<Q", 1 << 40) + b"abc."
    out["bad_huge_frame.pickle"] = p4 + b"\x95" + struct.pack("<Q", 1 << 62) + b"}."   # frame hint only
    out["bad_odd_setitems.pickle"] = p4 + b"}(\x8c\x08segmentsu."
    out["bad_memo_missing.pickle"] = p4 + b"}(\x8c\x08segmentsh\x07u."
    out["bad_too_wide.pickle"] = p4 + b"}(\x8c\x08segments](}(\x8c\x07address\x8a\x09" + \
        (1 << 64 | 5).to_bytes(9, "little") + b"ueu."
    out["bad_protocol1.pickle"] = pickle.dumps({"segments": []}, protocol=1)
    out["bad_deep.pickle"] = p4 + b"(" * 70000 + b"."
    out["bad_not_snapshot.pickle"] = pickle.dumps({"weights": [1.0, 2.0]}, protocol=4)
    out["bad_wrong_type.pickle"] = pickle.dumps({"segments": [{"device": 0, "address": 1, "total_size": "big", "blocks": []}]}, protocol=4)
    out["bad_empty.pickle"] = b""
    full = pickle.dumps(npu(), protocol=4)
    out["bad_truncated.pickle"] = full[: len(full) // 2]
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    files = {
        "torch113_list.pickle": pickle.dumps(torch113(), protocol=3),
        "torch113_list.json": to_json(torch113()),
        "npu_workspace.pickle": pickle.dumps(npu(), protocol=4),
        "wide_addr.pickle": pickle.dumps(wide(), protocol=4),
    }
    for proto in (2, 3, 4, 5):
        files["cuda21_p%d.pickle" % proto] = pickle.dumps(cuda21(), protocol=proto)
    files["cuda21_torchscript.pickle"] = torchscript_pickle(cuda21())
    j = cuda21()
    files["cuda21.json"] = to_json(j)
    files.update(hostile())
    for name, data in sorted(files.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), out))


if __name__ == "__main__":
    main()
