"""Producer addresses and the socket rules, as monitor/wire (Go) has them.

The cases both implementations must agree on are in one file,
monitor/wire/testdata/socket_rules.json, read by monitor/wire's Go tests and
by tests/test_socket_rules.py: an address string resolves to the same
network and address, a directory or a path is accepted or refused with the
same message.

- ``resolve``: ``wire.ResolveAddr`` (unix:/path, a path with a slash,
  tcp:host:port, host:port, :port, a bare pid naming its default socket,
  empty meaning this process's default socket).
- ``listen_address``: what ``wire.Listen`` listens on (TCP without a host is
  loopback; an empty TCP address is ``DEFAULT_TCP_ADDR``).
- ``default_socket_dir`` / ``default_socket_path``: ``wire.DefaultSocketDir``
  / ``wire.DefaultSocketPath``.
- ``check_socket_dir``: ``wire.CheckSocketDir``.
- ``prepare_socket_path``: ``wire.prepareSocketPath`` (the default directory
  checked, another one created; only a stale socket replaced).
"""

from __future__ import annotations

import os
import socket
import stat
from typing import Mapping, Optional, Tuple, Union

__all__ = [
    "DEFAULT_TCP_ADDR", "AddressError", "SocketRefused", "resolve", "listen_address", "parse_addr",
    "split_host_port", "join_host_port", "default_socket_dir", "default_socket_path", "check_socket_dir",
    "prepare_socket_path", "describe_mode",
]

DEFAULT_TCP_ADDR = "127.0.0.1:7787"  # wire.DefaultTCPAddr

TCPAddress = Tuple[str, int]
ListenAddress = Union[str, TCPAddress]


class AddressError(ValueError):
    """An address string that names no endpoint."""


class SocketRefused(RuntimeError):
    """A socket directory or path the rules refuse to use (another user's,
    open to others, a live socket, something that is not a socket)."""


def _clean(p: str) -> str:
    """filepath.Clean for the paths these rules build (normpath, and one
    leading slash where POSIX lets normpath keep two)."""
    p = os.path.normpath(p)
    if p.startswith("//"):
        p = "/" + p.lstrip("/")
    return p


def default_socket_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """$XDG_RUNTIME_DIR/npumon, else <$TMPDIR or /tmp>/npumon-<uid>."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_RUNTIME_DIR", "")
    if xdg:
        return _clean(os.path.join(xdg, "npumon"))
    return _clean(os.path.join(env.get("TMPDIR", "") or "/tmp", "npumon-%d" % os.getuid()))


def default_socket_path(pid: Optional[int] = None) -> str:
    """The socket `npumon attach <pid>` dials for process pid (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return os.path.join(default_socket_dir(), "%d.sock" % pid)


def _bad(s: str) -> AddressError:
    return AddressError('bad address "%s" (want unix:/path, host:port, :port or a pid)' % s)


def resolve(s: str, pid: Optional[int] = None) -> Tuple[str, str]:
    """(network, address) from an address as npumon's flags take it, by the
    rules of wire.ResolveAddr; pid is the process an empty address means
    (default: this one). AddressError when it names nothing."""
    if s == "":
        return "unix", default_socket_path(pid)
    if s.startswith("unix:"):
        path = s[len("unix:"):]
        if path:
            return "unix", path
        raise _bad(s)
    if s.startswith("tcp:"):
        return "tcp", s[len("tcp:"):]
    if "/" in s:
        return "unix", s
    if ":" in s:
        return "tcp", s
    # a bare pid: that process's default socket (strconv.Atoi: ASCII digits, one sign)
    digits = s[1:] if s[:1] in ("+", "-") else s
    if digits.isascii() and digits.isdigit() and int(s) > 0:
        return "unix", default_socket_path(int(s))
    raise _bad(s)


def split_host_port(s: str) -> Tuple[str, str]:
    """net.SplitHostPort: host:port or [host]:port. AddressError otherwise."""
    if s.startswith("["):
        end = s.find("]")
        if end < 0 or s[end + 1:end + 2] != ":":
            raise AddressError("address %s: missing port or bad brackets" % s)
        host, port = s[1:end], s[end + 2:]
        if "[" in port or "]" in port or ":" in port:
            raise AddressError("address %s: too many colons" % s)
        return host, port
    host, sep, port = s.rpartition(":")
    if not sep:
        raise AddressError("address %s: missing port in address" % s)
    if ":" in host:
        raise AddressError("address %s: too many colons in address" % s)
    if "[" in host or "]" in host:
        raise AddressError("address %s: unexpected bracket in address" % s)
    return host, port


def join_host_port(host: str, port: Union[int, str]) -> str:
    """net.JoinHostPort."""
    if ":" in host:
        return "[%s]:%s" % (host, port)
    return "%s:%s" % (host, port)


def listen_address(network: str, address: str) -> ListenAddress:
    """What wire.Listen listens on for a resolved address: the path for
    unix (empty: this process's default socket); (host, port) for tcp, a
    missing host being loopback and an empty address DEFAULT_TCP_ADDR.
    AddressError for a TCP address without a numeric port."""
    if network == "unix":
        return address or default_socket_path()
    if network != "tcp":
        raise AddressError("unsupported network %s (unix or tcp)" % network)
    host, port = split_host_port(address or DEFAULT_TCP_ADDR)
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise AddressError("address %s: the port must be a number from 0 to 65535" % address)
    return (host or "127.0.0.1", int(port))


def parse_addr(s: str, pid: Optional[int] = None) -> Tuple[str, ListenAddress]:
    """(network, listen address) from an address string: resolve, then
    listen_address."""
    network, address = resolve(s, pid)
    return network, listen_address(network, address)


def describe_mode(mode: int) -> str:
    """What a file is, as monitor/wire's describeMode says it (Go's
    FileMode type letters for the kinds it has no word for)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISSOCK(mode):
        letters = "S"
    elif stat.S_ISFIFO(mode):
        letters = "p"
    elif stat.S_ISCHR(mode):
        letters = "Dc"
    elif stat.S_ISBLK(mode):
        letters = "D"
    else:
        letters = "?"
    return letters + "---------"


def check_socket_dir(d: str, create: bool = True) -> None:
    """wire.CheckSocketDir: the socket directory must be a real directory
    (not a symlink) owned by this user with mode 0700, so that no other
    local user can have planted it or a socket in it. With create, a
    missing directory is made (its parent must exist). SocketRefused names
    what is wrong and how to fix it; OSError when it cannot be looked at."""
    if create:
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass  # the usual case: it is checked below like any existing one
    st = os.lstat(d)
    fix = "remove it or set XDG_RUNTIME_DIR"
    if not stat.S_ISDIR(st.st_mode):
        raise SocketRefused("socket directory %s is not a directory (%s); %s" % (d, describe_mode(st.st_mode), fix))
    if st.st_uid != os.getuid():
        raise SocketRefused("socket directory %s belongs to uid %d, not to this user (uid %d): refusing to use it; %s"
                            % (d, st.st_uid, os.getuid(), fix))
    perm = stat.S_IMODE(st.st_mode) & 0o777  # Go's Perm(): sticky and set-id bits aside
    if perm != 0o700:
        raise SocketRefused("socket directory %s has mode %04o, want 0700: refusing to use it; "
                            "chmod 700 it, remove it, or set XDG_RUNTIME_DIR" % (d, perm))


def prepare_socket_path(path: str) -> None:
    """Make a socket path's directory ready and clear a stale socket there
    (wire.prepareSocketPath): the default directory must pass
    check_socket_dir, another is created 0700 if missing; only a socket
    nobody accepts on is removed, a live one or anything that is not a
    socket is refused (SocketRefused) and left alone."""
    d = os.path.dirname(path) or "."
    if _clean(d) == _clean(default_socket_dir()):
        check_socket_dir(d)
    else:
        os.makedirs(d, 0o700, exist_ok=True)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise SocketRefused("%s exists and is not a socket (%s); not replacing it" % (path, describe_mode(st.st_mode)))
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        probe.close()
        try:
            os.unlink(path)  # stale: nobody listens
        except FileNotFoundError:
            pass  # someone else removed it first: the path is free all the same
        return
    except OSError as e:
        probe.close()
        raise SocketRefused("%s: cannot tell whether the socket is in use (%s); not replacing it" % (path, e))
    probe.close()
    raise SocketRefused("another producer is serving there")
