"""npumon_producer: serve a torch_npu (or torch CUDA) job's caching-allocator
trace to `npumon attach <pid>`, live.

Enable it with one line in the training script::

    import npumon_producer; npumon_producer.start()

or without editing the script::

    python -m npumon_producer [--interval 0.5] train.py ARGS...
    NPUMON_PRODUCER=1 PYTHONPATH=.../python/autostart:.../python python train.py ARGS...

It turns on the allocator's memory history
(``torch_npu.npu.memory._record_memory_history`` or
``torch.cuda.memory._record_memory_history``), polls ``_snapshot()`` on a
background daemon thread, and serves npumon's live wire protocol
(docs/protocol.md) on the socket ``npumon attach <pid>`` looks for. Standard
library only (Python >= 3.8); nothing it does raises into the training
loop. See docs/producer.md.

Modules: addr (addresses and the socket rules, shared with monitor/wire),
tail (where one poll's trace ends in the next), wire and encode (the
frames), server (clients and their limits), producer (the torch glue and
the poll thread). This module holds the process-wide producer.

Environment (each overrides the default; start()'s arguments override them):
  NPUMON_PRODUCER_INTERVAL     poll interval, seconds or a duration ("100ms")
  NPUMON_PRODUCER_MAX_ENTRIES  ring buffer size passed to _record_memory_history
  NPUMON_PRODUCER_ADDR         unix:/path, /path, tcp:host:port or :port
  NPUMON_PRODUCER_BACKEND      npu or cuda (default: whichever torch_npu / torch is loaded)
  NPUMON_PRODUCER_QUEUE        per-client queue bound, in trace entries
  NPUMON_PRODUCER_STACKS       python (default), all, or none (no Python stacks)
  NPUMON_PRODUCER_SNDBUF       kernel send buffer per client, bytes (default: the system's)
  NPUMON_PRODUCER_MAX_CLIENTS  clients served at once (default 16; one more gets a BYE)
  NPUMON_PRODUCER_BUDGET       share of the job's wall time the producer may cost (default 0.01)
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Dict, Optional, Union

from . import wire as wire
from .addr import check_socket_dir as check_socket_dir
from .addr import default_socket_path as default_socket_path
from .addr import parse_addr as parse_addr
from .addr import prepare_socket_path as prepare_socket_path
from .encode import MAX_FRAME_ENTRIES as MAX_FRAME_ENTRIES
from .encode import encode_entries as encode_entries
from .encode import encode_snapshot as encode_snapshot
from .producer import DEFAULT_BUDGET as DEFAULT_BUDGET
from .producer import DEFAULT_INTERVAL as DEFAULT_INTERVAL
from .producer import DEFAULT_MAX_ENTRIES as DEFAULT_MAX_ENTRIES
from .producer import DEFAULT_QUEUE as DEFAULT_QUEUE
from .producer import HEARTBEAT_S as HEARTBEAT_S
from .producer import Producer as Producer
from .report import log
from .server import ACCEPT_RATE as ACCEPT_RATE
from .server import MAX_CLIENTS as MAX_CLIENTS
from .server import RESYNC_S as RESYNC_S
from .server import WRITE_TIMEOUT_S as WRITE_TIMEOUT_S
from .tail import ANCHOR as ANCHOR
from .tail import align as align
from .tail import find_mark as find_mark
from .tail import find_tail as find_tail

# The module-level names of the single-module producer (before the package
# was split), kept for scripts that use them.
from .encode import Stacks as _Stacks
from .producer import duration as _duration
from .report import log as _log
from .tail import block_sizes as _block_sizes
from .tail import key as _key
from .tail import workspace_prefix as _workspace_prefix

__all__ = ["start", "stop", "poll", "stats", "Producer"]
__version__ = "0.1.0"

_lock = threading.Lock()
_producer: Optional[Producer] = None


def start(interval: Optional[Union[str, float]] = None, max_entries: Optional[int] = None,
          address: Optional[str] = None, backend: Optional[str] = None, record: bool = True,
          queue_entries: Optional[int] = None, stacks: Optional[str] = None, max_clients: Optional[int] = None,
          budget: Optional[float] = None) -> Optional[Producer]:
    """Start serving this process's allocator trace; returns the Producer, or
    None when it could not start (the reason goes to stderr). Never raises.
    The first call wins; later calls return the running producer."""
    global _producer
    try:
        with _lock:
            if _producer is not None:
                return _producer
            p = Producer(interval, max_entries, address, backend, record, queue_entries, stacks, max_clients, budget)
            p.start()
            _producer = p
            atexit.register(stop)
            return p
    except Exception as e:  # called by the job: a bad argument or a bug is said on stderr, never raised into it
        log("not started: %s: %s" % (type(e).__name__, e))
        return None


def stop(timeout: float = 2.0) -> None:
    """Take a last poll, say BYE to clients, remove the socket. Never raises."""
    global _producer
    try:
        with _lock:
            p, _producer = _producer, None
        if p is not None:
            p.stop(timeout)
    except Exception as e:  # called by the job (and atexit): whatever goes wrong is said, never raised
        log("stop: %s: %s" % (type(e).__name__, e))


def poll() -> bool:
    """Poll the allocator now instead of waiting for the interval; False
    when no producer is serving (or the poll failed: see stats()). Never
    raises."""
    p = _producer
    if p is None:
        return False
    try:
        return p.poll()
    except Exception as e:  # called by the job's training loop: a bug is counted and said, never raised
        p.report.error("poll", e)
        return False


def stats() -> Dict[str, Any]:
    """Counters of the running producer (empty when none). Never raises."""
    p = _producer
    if p is None:
        return {}
    try:
        return p.stats()
    except Exception as e:  # called by the job: a bug is counted and said, never raised
        p.report.error("stats", e)
        return {}


def _after_fork() -> None:
    # a forked child (a DataLoader worker) has no producer threads and must
    # not remove the parent's socket at exit
    global _producer
    p = _producer
    if p is not None:
        p._forked = True
    _producer = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
