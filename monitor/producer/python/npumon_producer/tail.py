"""Where one poll's trace ends in the next (docs/producer.md, "How it
follows the allocator").

torch's and torch_npu's ``_snapshot()`` copy the trace ring (oldest first),
then take the segments and record a ``snapshot`` entry of their active
bytes under the same lock. That entry cuts each state from the entries
after it; the last entries of the previous trace (its anchor) say where the
new ones begin. Everything here is pure: lists of torch's trace dicts in,
indices out.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["ANCHOR", "Entry", "Key", "key", "workspace_prefix", "find_tail", "find_mark", "align", "block_sizes"]

ANCHOR = 32  # trace entries that identify where the previous poll's trace ended

Entry = Mapping[str, Any]  # a trace entry as _snapshot() gives it
Key = Tuple[Any, Any, Any, Any, Any]  # what tells two entries apart without their stacks


def key(e: Entry) -> Key:
    return (e.get("action"), e.get("addr", 0), e.get("size", 0), e.get("stream", 0), e.get("time_us"))


def workspace_prefix(trace: Sequence[Entry]) -> int:
    """Number of leading entries torch_npu prepends on every _snapshot(): one
    workspace_snapshot, segment_alloc, alloc triple per workspace block."""
    i, n = 0, len(trace)
    while i + 2 < n and trace[i].get("action") == "workspace_snapshot":
        i += 3
    return i


def find_tail(anchor: Sequence[Key], trace: Sequence[Entry], start: int = 0) -> Optional[int]:
    """Index in trace of the first entry newer than the previous poll's, or
    None when the previous poll's newest entries are no longer in trace (the
    ring buffer wrapped past them: entries were lost).

    anchor holds the keys of the previous trace's last entries (oldest
    first). The trace is scanned from its newest entry backwards, so the
    cost is proportional to the new entries, not to the ring size; the
    match with the fewest new entries wins."""
    n = len(trace)
    if not anchor:
        return start
    last = anchor[-1]
    k = len(anchor)
    j = n - 1
    while j >= start:
        if key(trace[j]) == last:
            lo = j - k + 1
            ok = True
            # compare the anchor against what the ring still holds before j
            for a in range(k - 2, -1, -1):
                t = lo + a
                if t < start:
                    break
                if key(trace[t]) != anchor[a]:
                    ok = False
                    break
            if ok:
                return j + 1
        j -= 1
    return None


def find_mark(trace: Sequence[Entry], lo: int, active: int) -> Optional[int]:
    """Index of the newest `snapshot` entry of size active in trace[lo:]."""
    for j in range(len(trace) - 1, lo - 1, -1):
        e = trace[j]
        if e.get("action") == "snapshot" and e.get("size") == active:
            return j
    return None


def align(anchor: Sequence[Key], trace: Sequence[Entry], lo: int, mark: int, max_race: int = 4096) -> Optional[int]:
    """How many entries right before trace[mark] are newer than the previous
    trace, whose last entries' keys are anchor; None when the ring no longer
    holds any of them (it wrapped: entries were lost)."""
    k = len(anchor)
    if k == 0:
        return mark - lo
    for r in range(0, min(max_race, mark - lo) + 1):
        end = mark - r
        if end - 1 < lo:
            break
        ok = True
        for a in range(k - 1, -1, -1):
            t = end - k + a
            if t < lo:
                break
            if key(trace[t]) != anchor[a]:
                ok = False
                break
        if ok:
            return r
    return None


def block_sizes(entries: Sequence[Entry], segs: Sequence[Mapping[str, Any]]) -> Dict[int, int]:
    """{index: block size} for the alloc entries whose block is still live in
    segs: the newest alloc/free event at a live block's address settles it."""
    live: Dict[int, int] = {}
    for s in segs:
        at = int(s.get("address", 0))
        blocks: List[Mapping[str, Any]] = s.get("blocks") or []
        for blk in blocks:
            ba = blk.get("address")
            ba = at if ba is None else int(ba)
            size = int(blk.get("size", 0))
            at = ba + size
            if blk.get("state") != "inactive":
                live[ba] = size
    out: Dict[int, int] = {}
    if not live:
        return out
    for i in range(len(entries) - 1, -1, -1):
        e = entries[i]
        a = e.get("action")
        if a in ("alloc", "free_completed", "free", "free_requested"):
            addr = e.get("addr", 0)
            found = live.pop(addr) if addr in live else None
            if found is not None and a == "alloc":
                out[i] = found
            elif found is not None and a == "free_requested":
                live[addr] = found  # still the same block (pending free)
            if not live:
                break
    return out
