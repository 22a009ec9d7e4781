"""Helpers the snapshot generators share (gen_forward.py, gen_steps.py):
frame dicts and one segment's dict, laid out from the live allocations
the way torch's allocator reports them."""


def fr(*pairs):
    return [{"filename": f, "line": l, "name": n} for f, l, n in pairs]


def segment(live, base, size, frames):
    """The dict of a large segment at base of size bytes whose active
    blocks are live (address -> (size, frames, ...)); the gaps between
    them are inactive blocks."""
    blocks, cur = [], base
    for a in sorted(live):
        if a > cur:
            blocks.append({"address": cur, "size": a - cur, "requested_size": 0, "state": "inactive", "frames": []})
        bsize, bframes = live[a][0], live[a][1]
        blocks.append({"address": a, "size": bsize, "requested_size": bsize, "state": "active_allocated",
                       "frames": bframes})
        cur = a + bsize
    if cur < base + size:
        blocks.append({"address": cur, "size": base + size - cur, "requested_size": 0, "state": "inactive",
                       "frames": []})
    used = sum(v[0] for v in live.values())
    return {"device": 0, "address": base, "total_size": size, "allocated_size": used, "active_size": used,
            "requested_size": used, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": frames, "blocks": blocks}
