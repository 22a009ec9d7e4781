"""Start npumon_producer in every Python process that has NPUMON_PRODUCER=1,
without touching the training script:

    PYTHONPATH=<npumon>/monitor/producer/python/autostart:<npumon>/monitor/producer/python \
    NPUMON_PRODUCER=1 python train.py ...

(with npumon_producer installed, only this directory goes on PYTHONPATH).

Processes that never initialise a device (a launcher, data workers) keep an
idle producer thread that serves nothing. Any other sitecustomize on the path
still runs.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


try:
    if os.environ.get("NPUMON_PRODUCER", "") not in ("", "0"):
        import npumon_producer

        npumon_producer.start()
except Exception as e:  # runs before the job's own code: whatever fails here is said, never in the job's way
    sys.stderr.write("npumon_producer: autostart: %s\n" % e)
try:
    _chain()
except Exception as e:  # the other sitecustomize's own error: said, and the job starts, as Python itself does
    sys.stderr.write("npumon_producer: autostart: another sitecustomize failed: %s\n" % e)
