"""torch's snapshot dicts to wire frames: SNAPSHOT (segments and blocks),
ENTRIES (trace entries), and the producer-wide stack table behind STACKS
(docs/protocol.md). The frame primitives are in wire.py."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from . import wire

__all__ = ["MAX_FRAME_ENTRIES", "Stacks", "StackCache", "encode_snapshot", "encode_entries"]

MAX_FRAME_ENTRIES = 32768

StackKey = Tuple[wire.Frame, ...]
StackCache = Dict[int, int]  # id() of a frames list -> stack id, for one poll (the lists live that long)


class Stacks:
    """Producer-wide stack table: frames lists to ids, ids defined once."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.ids: Dict[StackKey, int] = {}
        self.defs: List[Tuple[int, StackKey]] = []  # (id, frames) in id order
        self.new: List[Tuple[int, StackKey]] = []  # defined since the last STACKS frame

    def id_of(self, frames: Optional[Sequence[Mapping[str, Any]]], cache: StackCache) -> int:
        if not frames or not self.enabled:
            return 0
        k = id(frames)
        sid = cache.get(k)
        if sid is not None:
            return sid
        key = tuple((str(f.get("filename", "")), int(f.get("line", 0) or 0), str(f.get("name", ""))) for f in frames)
        sid = self.ids.get(key)
        if sid is None:
            sid = len(self.defs) + 1
            self.ids[key] = sid
            self.defs.append((sid, key))
            self.new.append((sid, key))
        cache[k] = sid
        return sid


def _block_frames(blk: Mapping[str, Any]) -> Optional[Sequence[Mapping[str, Any]]]:
    fr: Optional[Sequence[Mapping[str, Any]]] = blk.get("frames")
    if fr is None:
        h = blk.get("history")
        if h:
            fr = h[0].get("frames")
    return fr


def _requested(blk: Mapping[str, Any]) -> int:
    r = blk.get("requested_size")
    if r is None:
        h = blk.get("history")
        if h and "real_size" in h[0]:
            return int(h[0]["real_size"])
        return int(blk.get("size", 0))
    return int(r)


def encode_snapshot(b: bytearray, segs: Sequence[Mapping[str, Any]], resume: Mapping[int, int], stacks: Stacks,
                    cache: StackCache) -> None:
    """A SNAPSHOT frame: segs (torch segment dicts, any devices), resume
    {device: seq}."""
    off = wire.begin(b, wire.SNAPSHOT)
    wire.uv(b, len(segs))
    for s in segs:
        wire.iv(b, int(s.get("device", 0)))
        addr = int(s.get("address", 0))
        wire.uv(b, addr)
        wire.iv(b, int(s.get("total_size", 0)))
        wire.uv(b, int(s.get("stream", 0)))
        pool = s.get("segment_pool_id")
        flags = (s.get("segment_type") == "large") | bool(s.get("is_expandable")) << 1 | (pool is not None) << 2
        b.append(flags)
        if pool is not None:
            wire.iv(b, int(pool[0]))
            wire.iv(b, int(pool[1]))
        wire.uv(b, stacks.id_of(s.get("frames"), cache))
        blocks: Sequence[Mapping[str, Any]] = s.get("blocks") or []
        wire.uv(b, len(blocks))
        at = addr
        for blk in blocks:
            ba = blk.get("address")
            ba = at if ba is None else int(ba)
            size = int(blk.get("size", 0))
            at = ba + size
            wire.uv(b, ba)
            wire.iv(b, size)
            wire.iv(b, _requested(blk))
            b.append(wire.STATES.get(blk.get("state", ""), 0))
            wire.uv(b, stacks.id_of(_block_frames(blk), cache))
    wire.uv(b, len(resume))
    for d, r in sorted(resume.items()):
        wire.iv(b, d)
        wire.uv(b, r)
    wire.end(b, off)


PrefixKey = Tuple[Any, Any, Any, Any]
_PREFIX_CACHE: Dict[PrefixKey, bytes] = {}


def _prefix(key: PrefixKey) -> bytes:
    """Encoded action, addr, size and stream of an entry (cached: a training
    loop repeats the same few thousand)."""
    b = _PREFIX_CACHE.get(key)
    if b is None:
        act, addr, size, stream = key
        out = bytearray()
        code = wire.ACTIONS.get(act)
        if code is None:
            out.append(wire.ACTION_BY_NAME)
            wire.string(out, str(act))
        else:
            out.append(code)
        wire.uv(out, int(addr or 0))
        wire.iv(out, int(size or 0))
        wire.uv(out, int(stream or 0))
        b = bytes(out)
        if len(_PREFIX_CACHE) >= 1 << 16:
            _PREFIX_CACHE.clear()
        _PREFIX_CACHE[key] = b
    return b


def encode_entries(b: bytearray, device: int, first: int, entries: Sequence[Mapping[str, Any]], stamp_us: int,
                   stacks: Stacks, cache: StackCache, block_sizes: Optional[Mapping[int, int]] = None) -> None:
    """ENTRIES frames for entries (torch trace dicts) numbered from first.
    Entries without time_us get stamp_us. block_sizes: {index: size}."""
    uv, iv, small = wire.uv, wire.iv, wire._SMALL
    id_of = stacks.id_of
    i0 = 0
    while i0 < len(entries):
        chunk = entries[i0:i0 + MAX_FRAME_ENTRIES]
        off = wire.begin(b, wire.ENTRIES)
        iv(b, device)
        uv(b, first + i0)
        uv(b, len(chunk))
        last = 0
        for i, e in enumerate(chunk, i0):
            get = e.get
            b += _prefix((get("action"), get("addr", 0), get("size", 0), get("stream", 0)))
            t = get("time_us")
            if t is None:
                t = stamp_us
            d = t - last
            if 0 <= d < 64:
                b += small[d << 1]
            else:
                iv(b, d)
            last = t
            sid = id_of(get("frames"), cache)
            if sid < 128:
                b += small[sid]
            else:
                uv(b, sid)
            pool = get("pool_id")
            cc = get("compile_context")
            um = get("user_metadata")
            df = get("device_free")
            bs = block_sizes.get(i, 0) if block_sizes else 0
            if pool is None and not cc and not um and not df and not bs:
                b += small[0]
                continue
            b.append((pool is not None) | bool(cc) << 1 | bool(um) << 2 | bool(df) << 3 | (bs > 0) << 4)
            if pool is not None:
                iv(b, int(pool[0]))
                iv(b, int(pool[1]))
            if cc:
                wire.string(b, cc)
            if um:
                wire.string(b, um)
            if df:
                iv(b, int(df))
            if bs > 0:
                iv(b, bs)
        wire.end(b, off)
        i0 += len(chunk)
