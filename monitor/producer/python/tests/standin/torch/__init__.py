"""Stand-in torch for npumon_producer's tests: only what the producer touches."""
__version__ = "2.5.0+standin"
from . import cuda  # noqa: E402,F401
