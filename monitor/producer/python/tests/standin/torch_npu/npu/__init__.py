"""Stand-in torch_npu.npu: initialised once an NPU stand-in allocator is loaded."""
import npumon_standin

from . import memory  # noqa: F401


def is_initialized():
    a = npumon_standin.current
    return a is not None and a.npu


def get_device_name(device=None):
    return "Ascend910B3"


def mem_get_info(device=None):
    a = npumon_standin.current
    total = 64 << 30
    used = 0
    if a is not None and a.last is not None:
        used = sum(s["total_size"] for s in a.last["segments"] if s["device"] == (device or 0))
    return total - used, total
