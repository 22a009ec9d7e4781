"""The producer installs offline into a virtualenv and works from there:
`pip install --no-index --no-build-isolation monitor/producer/python`
(and the plain `pip install --no-index`), then an import, the console
script and the autostart from the environment, from outside the source
tree. Skipped with a note where this Python cannot make a venv with pip
(Debian without python3-venv)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from typing import Dict, List

import npumon_producer

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "_backend"))
import npumon_backend  # noqa: E402


def _env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "NPUMON_PRODUCER"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: List[str], cwd: str, env: Dict[str, str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300)


def _tree(root: str) -> List[str]:
    out: List[str] = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        out.extend(os.path.relpath(os.path.join(d, f), root) for f in files)
    return sorted(out)


class TestPackage(unittest.TestCase):
    def test_project_table(self) -> None:
        p = npumon_backend.read_project()
        self.assertEqual(p["version"], npumon_producer.__version__, "pyproject.toml and __version__ differ")
        try:
            import tomllib  # type: ignore[import]  # 3.11+
        except ImportError:
            self.skipTest("no tomllib before Python 3.11: the backend's reading is checked there")
        with open(os.path.join(SRC, "pyproject.toml"), "rb") as f:
            want = tomllib.load(f)["project"]
        self.assertEqual(p, want, "the backend reads pyproject.toml's [project] differently from tomllib")

    def test_offline_install_into_a_venv(self) -> None:
        env = _env()
        before = _tree(SRC)
        with tempfile.TemporaryDirectory() as tmp:
            venv = os.path.join(tmp, "venv")
            # With pip importable here, the venv runs this Python's pip from the system site-packages
            # (the same pip D/bin/pip would be, without ensurepip's 5 s of copying it in).
            args = [sys.executable, "-m", "venv", "--system-site-packages", venv]
            if _run([sys.executable, "-c", "import pip"], tmp, env).returncode == 0:
                args.insert(3, "--without-pip")
            made = _run(args, tmp, env)
            if made.returncode != 0:
                self.skipTest("%s failed (Debian: apt-get install python3-venv): %s"
                              % (" ".join(args), made.stdout.strip().splitlines()[-1:]))
            py = os.path.join(venv, "bin", "python")
            isolation: List[List[str]] = [["--no-build-isolation"], []]
            for extra in isolation:
                inst = _run([py, "-m", "pip", "install", "--no-index", "--force-reinstall"] + extra + [SRC], tmp, env)
                self.assertEqual(inst.returncode, 0, "pip install %s:\n%s" % (" ".join(extra), inst.stdout))
            where = _run([py, "-c", "import npumon_producer as p; print(p.__file__); print(p.__version__)"], tmp, env)
            self.assertEqual(where.returncode, 0, where.stdout)
            path, version = where.stdout.split()
            self.assertTrue(os.path.realpath(path).startswith(os.path.realpath(venv)), path)
            self.assertEqual(version, npumon_producer.__version__)
            helped = _run([os.path.join(venv, "bin", "npumon-producer"), "--help"], tmp, env)
            self.assertEqual(helped.returncode, 0, helped.stdout)
            self.assertIn("training script", helped.stdout)
            # the autostart: only the sitecustomize directory on the path, the package from the venv
            script = os.path.join(tmp, "job.py")
            with open(script, "w") as f:
                f.write("import npumon_producer, sys\n"
                        "st = npumon_producer.stats()\n"
                        "print('started' if st and not st['serving'] else 'not started: %r' % st)\n"
                        "print(npumon_producer.__file__)\n")
            auto = dict(env, PYTHONPATH=os.path.join(SRC, "autostart"), NPUMON_PRODUCER="1",
                        NPUMON_PRODUCER_ADDR="unix:" + os.path.join(tmp, "s", "job.sock"))
            job = _run([py, script], tmp, auto)
            self.assertEqual(job.returncode, 0, job.stdout)
            lines = job.stdout.splitlines()
            self.assertEqual(lines[0], "started", job.stdout)  # no torch loaded: an idle producer thread
            self.assertTrue(os.path.realpath(lines[1]).startswith(os.path.realpath(venv)), job.stdout)
        self.assertEqual(_tree(SRC), before, "installing wrote into the source tree")


if __name__ == "__main__":
    unittest.main()
