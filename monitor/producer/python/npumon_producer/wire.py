"""Frame encoders for npumon's live wire protocol, version 1 (docs/protocol.md).

Standard library only. Every function appends to a bytearray; a frame is
u32 little-endian length, u8 type, payload. The torch-side encoders (a
snapshot's segments, trace entries) are in encode.py.
"""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

# (id, name, hbm_total, hbm_used, streams) of a device in HELLO and HEARTBEAT
Device = Tuple[int, str, int, int, int]
Frame = Tuple[str, int, str]  # (filename, line, name) of a stack frame

VERSION = 1
MAGIC = b"NPUMON"
MAX_FRAME = 16 << 20

HELLO, STACKS, SNAPSHOT, ENTRIES, OPS, HEARTBEAT, GAP, BYE = 1, 2, 3, 4, 5, 6, 7, 8

# time_base values of HELLO
TIME_EPOCH_US = 0
TIME_SEQUENCE = 1
TIME_POLL_US = 2  # epoch µs stamped by the producer when it found the entry

ACTIONS: Dict[str, int] = {
    "alloc": 0, "free_requested": 1, "free_completed": 2, "free": 3,
    "segment_alloc": 4, "segment_free": 5, "segment_map": 6, "segment_unmap": 7,
    "snapshot": 8, "oom": 9, "user_defined": 10, "annotate": 11, "workspace_snapshot": 12,
}
ACTION_BY_NAME = 0xFF

STATES: Dict[str, int] = {"inactive": 0, "active_allocated": 1, "active_pending_free": 2, "active_awaiting_free": 2}

_U64 = (1 << 64) - 1
_SMALL = [bytes((i,)) for i in range(128)]


def uv(b: bytearray, v: int) -> None:
    """Unsigned LEB128 varint."""
    if 0 <= v < 128:
        b += _SMALL[v]
        return
    v &= _U64
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)


def iv(b: bytearray, v: int) -> None:
    """Signed varint: zig-zag, then LEB128."""
    uv(b, ((v << 1) ^ (v >> 63)) & _U64)


def string(b: bytearray, s: Union[str, bytes]) -> None:
    data = s.encode("utf-8", "replace") if isinstance(s, str) else bytes(s)
    uv(b, len(data))
    b += data


def begin(b: bytearray, typ: int) -> int:
    off = len(b)
    b += b"\0\0\0\0"
    b.append(typ)
    return off


def end(b: bytearray, off: int) -> None:
    struct.pack_into("<I", b, off, len(b) - off - 4)


def hello(b: bytearray, pid: int, host: str, start_us: int, now_us: int, clock: str, time_base: int,
          devices: Sequence[Device], settings: Optional[Mapping[str, Any]] = None) -> None:
    """devices: list of (id, name, hbm_total, hbm_used, streams).
    settings: None or a dict as _snapshot()'s allocator_settings plus conf_key."""
    off = begin(b, HELLO)
    b += MAGIC
    b += struct.pack("<H", VERSION)
    uv(b, pid)
    string(b, host)
    iv(b, start_us)
    iv(b, now_us)
    string(b, clock)
    b.append(time_base)
    uv(b, len(devices))
    for d in devices:
        iv(b, d[0])
        string(b, d[1])
        iv(b, d[2])
        iv(b, d[3])
        uv(b, d[4])
    if settings is None:
        b.append(0)
    else:
        b.append(1)
        key = settings.get("conf_key", "PYTORCH_CUDA_ALLOC_CONF")
        string(b, key)
        string(b, str(settings.get(key, settings.get("PYTORCH_CUDA_ALLOC_CONF", "")) or ""))
        iv(b, int(settings.get("max_split_size", -1)))
        b += struct.pack("<d", float(settings.get("garbage_collection_threshold", 0.0)))
        flags = (bool(settings.get("expandable_segments")) |
                 bool(settings.get("release_lock_on_cudamalloc", settings.get("release_lock_on_malloc"))) << 1 |
                 bool(settings.get("pinned_use_cuda_host_register", settings.get("pinned_use_host_register"))) << 2 |
                 bool(settings.get("graph_capture_record_stream_reuse")) << 3)
        b.append(flags)
        iv(b, int(settings.get("pinned_num_register_threads", 0)))
        rd = settings.get("roundup_power2_divisions") or {}
        items: List[Tuple[int, int]] = []
        for k, v in (rd.items() if isinstance(rd, dict) else []):
            try:
                items.append((int(k), int(v)))
            except (TypeError, ValueError):
                continue  # not a pair of numbers: the wire has no room for it; the others still go
        uv(b, len(items))
        for k, v in items:
            iv(b, k)
            iv(b, v)
    end(b, off)


def stacks(b: bytearray, defs: Sequence[Tuple[int, Sequence[Frame]]]) -> None:
    """defs: list of (id, frames) with frames a tuple of (filename, line, name)."""
    off = begin(b, STACKS)
    uv(b, len(defs))
    for sid, frames in defs:
        uv(b, sid)
        uv(b, len(frames))
        for fn, line, name in frames:
            string(b, fn)
            iv(b, line)
            string(b, name)
    end(b, off)


def heartbeat(b: bytearray, now_us: int, devices: Sequence[Device]) -> None:
    off = begin(b, HEARTBEAT)
    iv(b, now_us)
    uv(b, len(devices))
    for d in devices:
        iv(b, d[0])
        iv(b, d[2])
        iv(b, d[3])
    end(b, off)


def gap(b: bytearray, device: int, missed: int, next_seq: int) -> None:
    off = begin(b, GAP)
    iv(b, device)
    uv(b, missed)
    uv(b, next_seq)
    end(b, off)


def bye(b: bytearray, reason: str) -> None:
    off = begin(b, BYE)
    string(b, reason)
    end(b, off)
