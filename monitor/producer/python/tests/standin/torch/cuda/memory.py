"""Stand-in torch.cuda.memory: history recording and _snapshot()."""
import sys

import npumon_standin


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False,
                           skip_actions=None):
    npumon_standin.current.record_memory_history(enabled, context, stacks, max_entries, device)


def _snapshot(device=None, augment_with_fx_traces=False):
    return npumon_standin.current.snapshot()
