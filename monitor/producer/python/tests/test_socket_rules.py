"""The socket rules against the cases monitor/wire's Go tests read too
(monitor/wire/testdata/socket_rules.json, TestSocketRules): addresses,
the default socket path, the socket directory and what may be replaced at a
socket path."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import unittest
from typing import Any, ContextManager, Dict, List, Mapping, Optional
from unittest import mock

from npumon_producer import addr

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "..", "..", "..", "wire", "testdata", "socket_rules.json")


def load() -> Dict[str, Any]:
    with open(RULES) as f:
        rules: Dict[str, Any] = json.load(f)
    return rules


def fill(s: str, **kw: str) -> str:
    for k, v in kw.items():
        s = s.replace("{%s}" % k, v)
    return s


def env_of(env: Mapping[str, Optional[str]]) -> Dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in env}
    out.update({k: v for k, v in env.items() if v is not None})
    return out


class Placed:
    """What a case puts at a path (the Go test's makeAt); close() ends a
    live listener."""

    def __init__(self, path: str, what: str) -> None:
        self.sock: Optional[socket.socket] = None
        if what in ("none", "missing", "missing_parent"):
            return
        if what == "file":
            with open(path, "w") as f:
                f.write("keep me")
        elif what == "dir":
            os.mkdir(path, 0o700)
        elif what == "symlink":
            os.mkdir(path + ".target", 0o700)
            os.symlink(path + ".target", path)
        elif what == "fifo":
            os.mkfifo(path, 0o600)
        elif what in ("socket", "live", "stale"):
            s = socket.socket(socket.AF_UNIX)
            s.bind(path)
            s.listen(1)
            if what == "live":
                self.sock = s
            else:
                s.close()  # the file stays: a stale socket
        else:
            raise AssertionError("socket_rules.json: unknown kind %r" % what)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def mode_of(path: str) -> str:
    return "0%o" % (os.lstat(path).st_mode & 0o7777)


class TestSocketRules(unittest.TestCase):
    rules = load()
    uid = str(os.getuid())

    def cases(self, section: str) -> List[Dict[str, Any]]:
        cs: List[Dict[str, Any]] = self.rules[section]
        self.assertTrue(cs, "socket_rules.json: %s is empty" % section)
        return cs

    def sub(self, c: Mapping[str, Any]) -> ContextManager[None]:
        return self.subTest(case=c.get("name", c.get("in", c.get("env"))))

    def check_error(self, err: Optional[BaseException], c: Mapping[str, Any], **vars: str) -> None:
        if c.get("error"):
            self.assertIsInstance(err, addr.SocketRefused, "want the error %s" % c["error"])
            self.assertEqual(str(err), fill(c["error"], uid=self.uid, **vars))
        elif c.get("error_contains"):
            self.assertIsInstance(err, OSError)
            self.assertIn(c["error_contains"], str(err).lower())
        else:
            self.assertIsNone(err, "refused")

    def test_default_socket_path(self) -> None:
        for c in self.cases("default_socket_path"):
            with self.sub(c):
                with mock.patch.dict(os.environ, env_of(c["env"]), clear=True):
                    self.assertEqual(addr.default_socket_path(c["pid"]), fill(c["want"], uid=self.uid))

    def test_addresses(self) -> None:
        with mock.patch.dict(os.environ, env_of(self.rules["addresses_env"]), clear=True):
            for c in self.cases("addresses"):
                with self.sub(c):
                    pid = c.get("pid") or None
                    if c.get("error"):
                        with self.assertRaises(addr.AddressError) as cm:
                            addr.resolve(c["in"], pid)
                        self.assertEqual(str(cm.exception), c["error"])
                        continue
                    network, address = addr.resolve(c["in"], pid)
                    self.assertEqual((network, address), (c["network"], c["address"]))
                    where = addr.listen_address(network, address)
                    listen = where if isinstance(where, str) else addr.join_host_port(*where)
                    self.assertEqual(listen, c["listen"])

    def test_socket_dir(self) -> None:
        for c in self.cases("socket_dir"):
            with self.sub(c):
                if c.get("needs_root") and os.getuid() != 0:
                    continue  # chown needs root (the Go test skips it too)
                with tempfile.TemporaryDirectory() as tmp:
                    d = os.path.join(tmp, "no", "d") if c["make"] == "missing_parent" else os.path.join(tmp, "d")
                    placed = Placed(d, c["make"])
                    try:
                        if c.get("mode"):
                            os.chmod(d, int(c["mode"], 8))
                        if c.get("owner"):
                            os.chown(d, c["owner"], c["owner"])
                        err: Optional[BaseException] = None
                        try:
                            addr.check_socket_dir(d, c["create"])
                        except (OSError, addr.SocketRefused) as e:
                            err = e
                        self.check_error(err, c, tmp=tmp, dir=d)
                        if c.get("mode_after"):
                            self.assertEqual(mode_of(d), c["mode_after"])
                    finally:
                        placed.close()

    def test_socket_path(self) -> None:
        for c in self.cases("socket_path"):
            with self.sub(c):
                with tempfile.TemporaryDirectory() as tmp:
                    xdg = os.path.join(tmp, "xdg")
                    os.mkdir(xdg, 0o700)
                    d = os.path.join(xdg, "npumon")
                    if not c["default_dir"]:
                        d = os.path.join(tmp, "elsewhere", "sub")
                        if c["dir"] != "missing":
                            os.mkdir(os.path.dirname(d), 0o700)
                    if c["dir"] in ("missing", "symlink"):
                        Placed(d, c["dir"])
                    else:
                        Placed(d, "dir")
                        os.chmod(d, int(c["dir"], 8))
                    path = os.path.join(d, "1.sock")
                    placed = Placed(path, c["at"])
                    try:
                        err: Optional[BaseException] = None
                        with mock.patch.dict(os.environ, {"XDG_RUNTIME_DIR": xdg}):
                            try:
                                addr.prepare_socket_path(path)
                            except addr.SocketRefused as e:
                                err = e
                        self.check_error(err, c, tmp=tmp, dir=d, path=path)
                        if "left" in c:
                            self.assertEqual(os.path.lexists(path), c["left"], "something left at the path")
                        if c.get("mode_after"):
                            self.assertEqual(mode_of(d), c["mode_after"])
                    finally:
                        placed.close()


if __name__ == "__main__":
    unittest.main()
