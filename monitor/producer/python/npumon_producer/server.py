"""Serving: the listening socket, one bounded queue and writer thread per
client, the limits of docs/producer.md ("Limits": a client cap, a write
deadline, a rate-limited accept, bounded threads) and BYE at shutdown.

What a client is sent comes from a Source (the Producer): HELLO, the
joining state (encoded once per poll and shared), GAPs for a client that
fell behind. Nothing here knows torch.
"""

from __future__ import annotations

import collections
import os
import select
import socket
import threading
import time
from typing import Deque, Dict, List, Mapping, Optional, Protocol, Tuple

from . import addr as _addr
from . import wire
from .report import DATA_ERRORS, Report, log

__all__ = ["MAX_CLIENTS", "WRITE_TIMEOUT_S", "ACCEPT_RATE", "RESYNC_S", "BACKLOG", "Source", "Client", "Server"]

MAX_CLIENTS = 16  # the Go server's MaxClients
WRITE_TIMEOUT_S = 5.0  # the Go server's WriteTimeout: a client that takes no data this long is dropped
ACCEPT_RATE = 20.0  # connections taken per second at most (burst MAX_CLIENTS): a storm waits in the backlog
RESYNC_S = 1.0  # a client that fell behind is repaired at most this often
BACKLOG = 16


class Source(Protocol):
    """What the server sends, from the producer's state."""

    mu: "threading.RLock"

    def hello(self) -> bytearray:
        """A HELLO for a joining client."""

    def state(self, b: bytearray) -> int:
        """Append STACKS, SNAPSHOT and the entries since (shared, encoded at
        most once per poll); the number of entries appended. Called with mu."""

    def gaps(self, drop_from: Mapping[int, int]) -> bytes:
        """GAP frames for a client that lost entries from drop_from
        {device: first sequence number not delivered}. Called with mu."""


class Client:
    """One client: a bounded queue drained by its own writer thread, so a
    slow reader never blocks the poll thread (docs/protocol.md, producer
    rules). Queue items are (bytes, entries); entries -1 marks the BYE."""

    def __init__(self, server: "Server", sock: socket.socket, limit: int) -> None:
        self.server = server
        self.sock = sock
        self.limit = limit
        self.cv = threading.Condition()
        self.q: Deque[Tuple[bytes, int]] = collections.deque()
        self.qn = 0
        self.lagging = False
        self.drop_from: Dict[int, int] = {}  # device -> first sequence number not delivered
        self.dropped = 0
        self.last_resync = 0.0
        self.closed = False
        self.thread = threading.Thread(target=self._run, name="npumon-producer-client", daemon=True)

    def push(self, data: bytes, entries: int = 0, device: Optional[int] = None, first: int = 0,
             droppable: bool = True) -> None:
        with self.cv:
            if self.closed:
                return
            if entries > 0 and self.lagging:
                self.dropped += entries
                return
            if entries > 0 and self.qn > 0 and self.qn + entries > self.limit:
                # (a batch bigger than the bound still enters an empty queue:
                # a client that keeps up is never starved by one big poll)
                self.lagging = True
                if device is not None:
                    self.drop_from.setdefault(device, first)
                self.dropped += entries
                self.cv.notify()
                return
            if entries == 0 and self.lagging and droppable:
                return  # a resync follows; GAPs and SNAPSHOTs before it are moot
            self.q.append((data, entries))
            if entries > 0:
                self.qn += entries
            self.cv.notify()

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify()

    def _run(self) -> None:
        srv = self.server
        sock = self.sock
        try:
            # sendall's timeout bounds the whole write (Python >= 3.5)
            sock.settimeout(srv.write_timeout)
            while True:
                with self.cv:
                    while not self.q and not self.closed and not (self.lagging and self._may_resync()):
                        self.cv.wait(0.25)
                    items = list(self.q)
                    self.q.clear()
                    self.qn = 0
                    lagging, closed = self.lagging, self.closed
                bye = [d for d, n in items if n < 0]
                data = b"".join(d for d, n in items if n >= 0)
                if data:
                    sock.sendall(data)
                if lagging and (bye or closed or self._may_resync()):
                    sock.sendall(srv.resync(self))
                if bye:
                    sock.sendall(b"".join(bye))
                    return
                if closed and not items:
                    return
        except socket.timeout:
            srv.stalled += 1
            srv.report.error("client", RuntimeError("disconnected: it took no data for %gs" % srv.write_timeout))
        except OSError:
            srv.gone += 1  # the client hung up (EPIPE, ECONNRESET) or was shut down by the watcher: its session ends
        except Exception as e:  # the writer thread's top: a bug in encoding a resync must end this client, not the job
            srv.report.error("client writer", e)
        finally:
            srv.drop(self)
            srv.close(sock)

    def _may_resync(self) -> bool:
        return time.monotonic() - self.last_resync >= RESYNC_S


class Server:
    """The listening socket and the clients of one producer. Its methods
    raise only from bind() (the reasons the producer cannot start)."""

    def __init__(self, source: Source, address: str, stop: threading.Event, report: Report,
                 max_clients: int = MAX_CLIENTS, queue: int = 1 << 16, sndbuf: int = 0) -> None:
        self.source = source
        self.address = address
        self.max_clients = max_clients
        self.queue = queue
        self.sndbuf = sndbuf
        self.write_timeout = WRITE_TIMEOUT_S
        self.accept_rate = ACCEPT_RATE
        self.report = report
        self._stop = stop
        self.clients: List[Client] = []
        self.listener: Optional[socket.socket] = None
        self.path: Optional[str] = None
        self.refused = 0  # connections refused over max_clients
        self.stalled = 0  # clients dropped for taking no data within write_timeout
        self.gone = 0  # clients that hung up

    def bind(self) -> socket.socket:
        """The listening socket (clients wait in its backlog until the first
        state is ready). Raises addr.AddressError, addr.SocketRefused or
        OSError with the reason."""
        fam, where = _addr.parse_addr(self.address)
        if isinstance(where, str):
            _addr.prepare_socket_path(where)
            ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                ln.bind(where)
                os.chmod(where, 0o600)
            except OSError:
                ln.close()
                raise
            self.path = where
        else:
            ln = socket.socket(socket.AF_INET6 if ":" in where[0] else socket.AF_INET, socket.SOCK_STREAM)
            try:
                ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                ln.bind(where)
            except OSError:
                ln.close()
                raise
            if where[0] not in ("127.0.0.1", "::1", "localhost") and not where[0].startswith("127."):
                # as wire.Listen warns
                log("warning: serving on %s, reachable from other hosts; the stream carries stack frames "
                    "(file and function names) and is neither authenticated nor encrypted (docs/protocol.md, "
                    "Security)" % _addr.join_host_port(where[0], where[1]))
        ln.listen(BACKLOG)
        self.listener = ln
        return ln

    def serve(self, ln: socket.socket) -> None:
        threading.Thread(target=self._accept, args=(ln,), name="npumon-producer-accept", daemon=True).start()

    def broadcast(self, data: bytes, entries: int = 0, device: Optional[int] = None, first: int = 0,
                  droppable: bool = True) -> None:
        for c in self.clients:
            c.push(data, entries, device, first, droppable)

    def _accept(self, ln: socket.socket) -> None:
        try:
            self._accept_loop(ln)
        except Exception as e:  # the accept thread's top: whatever ends it is logged, never raised into the job
            self.report.error("accept", e)

    def _accept_loop(self, ln: socket.socket) -> None:
        threading.Thread(target=self._watch, name="npumon-producer-watch", daemon=True).start()
        full = bytearray()
        wire.bye(full, "too many clients (%d); try again later" % self.max_clients)
        over = bytes(full)
        tokens, last = float(self.max_clients), time.monotonic()
        while not self._stop.is_set():
            # a token bucket: a connection storm waits in the listen backlog
            # (then is refused by the kernel), it does not take the job's time
            now = time.monotonic()
            tokens = min(float(self.max_clients), tokens + (now - last) * self.accept_rate)
            last = now
            if tokens < 1:
                time.sleep((1 - tokens) / self.accept_rate)
                continue
            try:
                conn, _ = ln.accept()
            except OSError as e:
                if self._stop.is_set() or self.listener is None:
                    return  # closed by shutdown
                self.report.error("accept", e)  # out of descriptors (EMFILE) or an aborted connection
                time.sleep(0.05)
                continue
            tokens -= 1
            if len(self.clients) >= self.max_clients:
                self.refused += 1
                try:
                    conn.setblocking(False)
                    conn.send(over)  # it fits any empty send buffer
                except OSError:
                    self.gone += 1  # it hung up first: refused all the same (counted above)
                self.close(conn)
                continue
            try:
                self._join(conn)
            except OSError as e:
                self.report.error("client", e)
                self.close(conn)
            except DATA_ERRORS as e:  # the state from torch's dicts could not be encoded
                self.report.error("client state", e)
                self.close(conn)

    def _join(self, conn: socket.socket) -> None:
        if self.sndbuf > 0:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
        c = Client(self, conn, self.queue)
        with self.source.mu:
            if self.listener is None:  # shut down while this one was accepted: nothing to serve
                self.close(conn)
                return
            b = self.source.hello()
            self.source.state(b)
            c.q.append((bytes(b), 0))
            # started before anyone can see it: shutdown joins the writers of
            # the clients it finds, so that the job does not exit (killing the
            # daemon threads) before they have sent what they hold and BYE
            c.thread.start()
            self.clients.append(c)

    def _watch(self) -> None:
        try:
            self._watch_loop()
        except Exception as e:  # the watch thread's top: logged, never raised into the job
            self.report.error("watch", e)

    def _watch_loop(self) -> None:
        """One thread for every client (threads stay bounded): a client
        never sends anything, so bytes or EOF end its session."""
        while not self._stop.is_set():
            clients = [c for c in list(self.clients) if not c.closed]
            if not clients:
                self._stop.wait(0.1)
                continue
            try:
                # poll, not select: a job's descriptors may be past FD_SETSIZE
                pl = select.poll()
                by_fd: Dict[int, Client] = {}
                for c in clients:
                    fd = c.sock.fileno()
                    if fd >= 0:
                        by_fd[fd] = c
                        pl.register(fd, select.POLLIN)
                ready = pl.poll(100)
            except (OSError, ValueError):  # a socket closed under us: look again
                self._stop.wait(0.01)
                continue
            for fd, _ in ready:
                cl = by_fd.get(fd)
                if cl is not None:
                    cl.close()
                    try:
                        cl.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass  # already disconnected (ENOTCONN): its writer ends the session all the same

    def drop(self, c: Client) -> None:
        with self.source.mu:
            if c in self.clients:
                self.clients.remove(c)

    def resync(self, c: Client) -> bytes:
        """The bytes that repair a client that fell behind: a GAP for what it
        missed, a fresh SNAPSHOT and the entries since."""
        with self.source.mu:
            with c.cv:
                drop_from = dict(c.drop_from)
            b = bytearray(self.source.gaps(drop_from))
            self.source.state(b)
            with c.cv:
                c.lagging = False
                c.drop_from = {}
                c.last_resync = time.monotonic()
            return bytes(b)

    def shutdown(self, timeout: float) -> None:
        """BYE to every client, stop listening, remove the socket, and wait
        up to timeout for the writers to send what they hold."""
        with self.source.mu:
            clients = list(self.clients)
            b = bytearray()
            wire.bye(b, "producer exiting")
            for c in clients:
                c.push(bytes(b), -1, droppable=False)
                c.close()
            ln, self.listener = self.listener, None
            path, self.path = self.path, None
        # the path goes as listening stops, not after the clients' writers
        # are done: by then a restarted producer may serve there
        if path:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass  # removed by someone else: what stop() wants all the same
            except OSError as e:
                self.report.error("removing the socket", e)
        if ln is not None:
            self.close(ln)
        deadline = time.monotonic() + timeout
        for c in clients:
            c.thread.join(max(0.0, deadline - time.monotonic()))
            self.close(c.sock)

    def close(self, sock: socket.socket) -> None:
        try:
            sock.close()
        except OSError as e:  # nothing left to release; counted and said once
            self.report.skip("close", e)
