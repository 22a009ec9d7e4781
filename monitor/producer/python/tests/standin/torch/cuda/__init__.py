"""Stand-in torch.cuda: initialised once a CUDA stand-in allocator is loaded."""
import npumon_standin

from . import memory  # noqa: F401


def is_initialized():
    a = npumon_standin.current
    return a is not None and not a.npu


def get_device_name(device=None):
    return "Stand-in GPU"


def mem_get_info(device=None):
    return _mem_get_info(device)


def _mem_get_info(device):
    a = npumon_standin.current
    total = 80 << 30
    used = 0
    if a is not None and a.last is not None:
        used = sum(s["total_size"] for s in a.last["segments"] if s["device"] == (device or 0))
    return total - used, total
