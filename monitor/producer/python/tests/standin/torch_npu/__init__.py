"""Stand-in torch_npu for npumon_producer's tests."""
import torch  # noqa: F401  (the real torch_npu imports torch too)

from . import npu  # noqa: F401
