"""How the producer says what went wrong: one line on stderr, prefixed
``npumon_producer:``, and a counter in stats(); never an exception into the
job."""

from __future__ import annotations

import struct
import sys
import threading
from typing import Dict, Set, Tuple, Type

__all__ = ["log", "Report", "DATA_ERRORS", "TorchError"]

# What encoding torch's dicts can raise when one is not shaped as expected
# (a missing or non-numeric field, a value out of a varint's range).
DATA_ERRORS: Tuple[Type[BaseException], ...] = (
    TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, struct.error)

lost_lines = 0  # log lines stderr refused (closed or detached by the job)


class TorchError(Exception):
    """torch or torch_npu raised; the original exception is __cause__."""


def log(msg: str) -> None:
    global lost_lines
    try:
        sys.stderr.write("npumon_producer: %s\n" % msg)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        # stderr closed (ValueError), its pipe gone (OSError) or set to None
        # by the job: there is nowhere to say it; counted instead
        lost_lines += 1


class Report:
    """errors: counted, the first `limit` logged. skipped: things left out
    on purpose (a device whose name torch cannot give), counted by reason,
    each reason logged once."""

    def __init__(self, limit: int = 5) -> None:
        self.limit = limit
        self.errors = 0
        self.skipped: Dict[str, int] = {}
        self._said: Set[str] = set()
        self._mu = threading.Lock()

    def error(self, what: str, e: BaseException) -> None:
        with self._mu:
            self.errors += 1
            say = self.errors <= self.limit
        if say:
            log("%s: %s: %s" % (what, type(e).__name__, e))

    def skip(self, what: str, e: BaseException) -> None:
        with self._mu:
            self.skipped[what] = self.skipped.get(what, 0) + 1
            first = what not in self._said
            self._said.add(what)
        if first:
            log("%s: %s: %s (not said again; counted in stats()['skipped'])" % (what, type(e).__name__, e))
