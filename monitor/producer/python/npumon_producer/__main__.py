"""python -m npumon_producer [--interval S] [--max-entries N] [--addr ADDR] SCRIPT [ARGS...]

Runs SCRIPT as __main__ with the producer started first: no edit to the
training script. Also: python -m npumon_producer -m MODULE [ARGS...].
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from typing import List, Optional

import npumon_producer


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m npumon_producer",
                                 description="Run a training script with npumon's live producer started.")
    ap.add_argument("--interval", help="poll interval: seconds or a duration such as 100ms (default 0.5)")
    ap.add_argument("--max-entries", type=int, help="ring buffer size for _record_memory_history (default 16384)")
    ap.add_argument("--addr", help="unix:/path, /path, tcp:host:port or :port (default: the socket npumon attach PID finds)")
    ap.add_argument("--backend", choices=["npu", "cuda"], help="default: torch_npu when the job loads it, else torch.cuda")
    ap.add_argument("-m", dest="module", help="run a library module as a script, as python -m does")
    ap.add_argument("script", nargs="?", help="the training script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if not a.module and not a.script:
        ap.error("a script (or -m MODULE) to run is required")
    npumon_producer.start(interval=a.interval, max_entries=a.max_entries, address=a.addr, backend=a.backend)
    if a.module:
        sys.argv = [a.module] + ([a.script] if a.script else []) + a.args
        runpy.run_module(a.module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = [a.script] + a.args
        sys.path.insert(0, os.path.dirname(os.path.abspath(a.script)))
        runpy.run_path(a.script, run_name="__main__")


if __name__ == "__main__":
    main()
