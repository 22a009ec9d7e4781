"""A PEP 517 / PEP 660 build backend in the standard library only.

The producer has to install where training jobs run, often without network:
``pip install --no-index .`` must work on a Python that has no setuptools
(3.12+ venvs) or no ``wheel`` (pyenv builds), with or without build
isolation. This backend needs nothing: it reads the ``[project]`` table of
pyproject.toml (the few kinds of value it holds: strings, lists of strings,
the ``[project.scripts]`` table) and zips the package into a pure-Python
wheel. Editable installs put a .pth naming this directory.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "npumon_producer"
SDIST_FILES = ["pyproject.toml", "_backend/npumon_backend.py", "autostart/sitecustomize.py"]

Project = Dict[str, Union[str, List[str], Dict[str, str]]]

_STRING = r'"((?:[^"\\]|\\.)*)"'


def _unquote(s: str) -> str:
    return s.encode("latin-1", "backslashreplace").decode("unicode_escape")


def _strip_comment(line: str) -> str:
    quoted = escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i].strip()
    return line.strip()


def read_project(path: Optional[str] = None) -> Project:
    """The [project] table (and [project.scripts]) of pyproject.toml: keys
    whose values are a string or a list of strings, each on one line or a
    list over several. Anything else there is an error, not a guess."""
    with open(path or os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        lines = [_strip_comment(line) for line in f.read().splitlines()]
    out: Project = {}
    table: Optional[Dict[str, Any]] = None
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if line.startswith("["):
            name = line.strip("[] ")
            if name == "project":
                table = out
            elif name == "project.scripts":
                scripts: Dict[str, str] = {}
                out["scripts"] = scripts
                table = scripts
            else:
                table = None
            continue
        if table is None:
            continue
        m = re.match(r'([A-Za-z0-9_.-]+|"[^"]+")\s*=\s*(.*)$', line)
        if not m:
            raise ValueError("pyproject.toml line %d: cannot read %r" % (i, line))
        key, value = m.group(1).strip('"'), m.group(2).strip()
        if value.startswith("["):
            while not value.endswith("]") and i < len(lines):
                value += " " + lines[i]
                i += 1
            body = value[1:-1]
            items = re.findall(_STRING, body)
            if re.sub(_STRING, "", body).replace(",", "").strip():
                raise ValueError("pyproject.toml: %s: only lists of strings are read here" % key)
            table[key] = [_unquote(s) for s in items]
            continue
        m = re.match(_STRING + "$", value)
        if not m:
            raise ValueError("pyproject.toml: %s: only strings and lists of strings are read here" % key)
        table[key] = _unquote(m.group(1))
    if not isinstance(out.get("name"), str) or not isinstance(out.get("version"), str):
        raise ValueError("pyproject.toml: [project] needs a name and a version")
    return out


def _dist(p: Project) -> Tuple[str, str]:
    name = re.sub(r"[-_.]+", "_", str(p["name"])).lower()
    return name, str(p["version"])


def _metadata(p: Project) -> str:
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"]]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    for c in p.get("classifiers") or []:
        lines.append("Classifier: %s" % c)
    for d in p.get("dependencies") or []:
        lines.append("Requires-Dist: %s" % d)
    return "\n".join(lines) + "\n"


def _dist_info(p: Project) -> Dict[str, bytes]:
    files = {
        "METADATA": _metadata(p).encode(),
        "WHEEL": b"Wheel-Version: 1.0\nGenerator: npumon_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    scripts = p.get("scripts")
    if isinstance(scripts, dict) and scripts:
        files["entry_points.txt"] = ("[console_scripts]\n" + "".join(
            "%s = %s\n" % kv for kv in sorted(scripts.items()))).encode()
    return files


def _package_files() -> List[str]:
    out = []
    for root, dirs, files in os.walk(os.path.join(HERE, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                out.append(os.path.relpath(os.path.join(root, f), HERE).replace(os.sep, "/"))
    return out


def _date() -> Tuple[int, int, int, int, int, int]:
    t = time.gmtime(max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800))
    return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec)


def _wheel(wheel_directory: str, members: Mapping[str, bytes], p: Project) -> str:
    name, version = _dist(p)
    info = "%s-%s.dist-info" % (name, version)
    entries = dict(members)
    for k, v in _dist_info(p).items():
        entries["%s/%s" % (info, k)] = v
    record = []
    for path, data in entries.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append("%s/RECORD,," % info)
    entries["%s/RECORD" % info] = ("\n".join(record) + "\n").encode()
    filename = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries.items():
            zi = zipfile.ZipInfo(path, _date())
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def _read(rel: str) -> bytes:
    with open(os.path.join(HERE, rel), "rb") as f:
        return f.read()


# ---- PEP 517 ----

def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[Mapping[str, Any]] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, Any]] = None) -> str:
    p = read_project()
    name, version = _dist(p)
    info = "%s-%s.dist-info" % (name, version)
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for k, v in _dist_info(p).items():
        with open(os.path.join(metadata_directory, info, k), "wb") as f:
            f.write(v)
    return info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _wheel(wheel_directory, {rel: _read(rel) for rel in _package_files()}, read_project())


def build_editable(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _wheel(wheel_directory, {"%s_editable.pth" % PACKAGE: (HERE + "\n").encode()}, read_project())


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    p = read_project()
    name, version = _dist(p)
    top = "%s-%s" % (name, version)
    filename = top + ".tar.gz"
    members = {rel: _read(rel) for rel in SDIST_FILES + _package_files()}
    members["PKG-INFO"] = _metadata(p).encode()
    mtime = max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel, data in sorted(members.items()):
            ti = tarfile.TarInfo("%s/%s" % (top, rel))
            ti.size = len(data)
            ti.mode = 0o644
            ti.mtime = mtime
            t.addfile(ti, io.BytesIO(data))
    return filename
