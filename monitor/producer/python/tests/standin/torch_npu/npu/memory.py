"""Stand-in torch_npu.npu.memory, with torch_npu's signatures:
_record_memory_history(enabled="all", context="all", stacks="all",
max_entries=sys.maxsize, device=None) and _snapshot(device=None)."""
import sys

import npumon_standin


def _record_memory_history(enabled="all", *args, **kwargs):
    return _record_memory_history_impl(enabled, *args, **kwargs)


def _record_memory_history_impl(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    npumon_standin.current.record_memory_history(enabled, context, stacks, max_entries, device)


def _snapshot(device=None):
    return npumon_standin.current.snapshot()
