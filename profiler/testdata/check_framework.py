#!/usr/bin/env python3
"""Independent decoder: reads a FRAMEWORK directory the way torch_npu's
_tlv_decoder / FILE_BEAN_MAP do (the struct strings of
docs/reference/profiler-format.md §2) and prints the records as JSON. Used
by the Go tests to cross-check npumon's writer.

usage: check_framework.py FRAMEWORK_DIR
"""
import json
import os
import struct
import sys

BEANS = {  # file prefix -> (constant block struct, field names)
    "torch.op_range": ("<3q4QB?", ["start", "end", "seq", "pid", "start_tid", "end_tid", "fwd_tid", "scope", "async"]),
    "torch.op_mark": ("<q4Q", ["time", "category", "corr", "tid", "pid"]),
    "torch.memory_usage": ("<7q2b3B2Q", ["ptr", "time", "alloc_size", "allocated", "reserved", "active", "stream",
                                         "device_type", "device_index", "component", "data_type", "allocator_type",
                                         "tid", "pid"]),
}


def decode(path, fmt, names):
    size = struct.calcsize(fmt)
    data = open(path, "rb").read()
    out, i = [], 0
    while i + 6 <= len(data):
        _, length = struct.unpack_from("<HI", data, i)
        if i + 6 + length > len(data):
            break
        v = data[i + 6:i + 6 + length]
        i += 6 + length
        if len(v) < size:
            continue
        rec = dict(zip(names, struct.unpack_from(fmt, v, 0)))
        j = size
        while j + 6 <= len(v):
            fid, flen = struct.unpack_from("<HI", v, j)
            try:
                rec["f%d" % fid] = v[j + 6:j + 6 + flen].decode("utf-8")
            except UnicodeDecodeError:
                rec["f%d" % fid] = "N/A"
            j += 6 + flen
        out.append(rec)
    return out


if __name__ == "__main__":
    d = sys.argv[1]
    res = {}
    for name in sorted(os.listdir(d)):
        for prefix, (fmt, names) in BEANS.items():
            if name.startswith(prefix):
                res[prefix] = decode(os.path.join(d, name), fmt, names)
    json.dump(res, sys.stdout)
