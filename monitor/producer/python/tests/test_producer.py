"""Unit tests of npumon_producer (make test-python, and `make test` through cmd/npumon's
TestProducerPython)."""
import os
import socket
import tempfile
import threading
import time
import unittest

import npumon_producer as p
from npumon_producer import server, wire


def ev(action, addr=0, size=0, **kw):
    e = {"action": action, "addr": addr, "size": size, "stream": 7}
    e.update(kw)
    return e



class TestTail(unittest.TestCase):
    def test_mark_and_race(self):
        prev = [ev("alloc", 16 * i, 100) for i in range(10)]
        anchor = [p._key(e) for e in prev[-p.ANCHOR:]]
        race = [ev("alloc", 999, 5)]
        mark = ev("snapshot", 0, 12345)
        new = [ev("free_completed", 16, 100)]
        trace = prev + race + [mark] + new + [ev("snapshot", 0, 12245)]
        m = p.find_mark(trace, 0, 12345)
        self.assertEqual(m, 11)
        self.assertEqual(p.align(anchor, trace, 0, m), 1)

    def test_ring_wrapped_but_anchor_left(self):
        # the ring keeps only the last 4 of the previous entries
        prev = [ev("alloc", 16 * i, 100) for i in range(10)]
        anchor = [p._key(e) for e in prev]
        trace = prev[6:] + [ev("snapshot", 0, 1)] + [ev("alloc", 5000 + i, 1) for i in range(3)]
        self.assertEqual(p.align(anchor, trace, 0, 4), 0)

    def test_ring_wrapped_past_everything(self):
        prev = [ev("alloc", 16 * i, 100) for i in range(10)]
        anchor = [p._key(e) for e in prev]
        trace = [ev("snapshot", 0, 1)] + [ev("alloc", 5000 + i, 1) for i in range(3)]
        self.assertIsNone(p.align(anchor, trace, 0, 0))

    def test_periodic_workload_is_cut_at_the_mark(self):
        # a training loop repeats the same entries; the poll's own snapshot
        # entry tells the copies apart
        step = [ev("alloc", 64, 10), ev("alloc", 128, 10), ev("free_completed", 64, 10), ev("free_completed", 128, 10)]
        prev = step * 5
        anchor = [p._key(e) for e in prev[-p.ANCHOR:]]
        trace = prev + [ev("snapshot", 0, 0)] + step * 3
        m = p.find_mark(trace, 0, 0)
        self.assertEqual((m, p.align(anchor, trace, 0, m)), (20, 0))

    def test_find_tail_without_marks(self):
        prev = [ev("alloc", i, 1, time_us=i) for i in range(50)]
        anchor = [p._key(e) for e in prev[-p.ANCHOR:]]
        trace = prev[20:] + [ev("alloc", 100 + i, 1, time_us=100 + i) for i in range(5)]
        self.assertEqual(p.find_tail(anchor, trace), 30)
        self.assertIsNone(p.find_tail(anchor, [ev("alloc", 1000, 1, time_us=1000)]))

    def test_workspace_prefix(self):
        t = [ev("workspace_snapshot", 1, 2), ev("segment_alloc", 1, 2), ev("alloc", 1, 2), ev("alloc", 9, 1)]
        self.assertEqual(p._workspace_prefix(t), 3)
        self.assertEqual(p._workspace_prefix(t[3:]), 0)

    def test_block_sizes(self):
        segs = [{"address": 0, "total_size": 4096, "blocks": [
            {"size": 1024, "requested_size": 1000, "state": "active_allocated"},
            {"size": 3072, "requested_size": 0, "state": "inactive"}]}]
        ents = [ev("alloc", 0, 900), ev("free_completed", 0, 900), ev("alloc", 0, 1000), ev("alloc", 1024, 10),
                ev("free_completed", 1024, 10)]
        self.assertEqual(p._block_sizes(ents, segs), {2: 1024})


class TestWire(unittest.TestCase):
    def test_doc_example(self):
        # docs/protocol.md, "Example": HELLO for pid 4242 on n1, then an empty SNAPSHOT
        b = bytearray()
        wire.hello(b, 4242, "n1", 0, 0, "realtime", 0, [])
        p.encode_snapshot(b, [], {}, p._Stacks(), {})
        want = bytes.fromhex("1c00000001 4e50554d4f4e 0100 9221 026e31 00 00 087265616c74696d65 00 00 00"
                             " 0300000003 00 00".replace(" ", ""))
        self.assertEqual(bytes(b), want)

    def test_varints(self):
        for v, h in [(0, "00"), (-1, "01"), (1, "02"), (300, "d804"), (-(2 ** 63), "ffffffffffffffffff01")]:
            b = bytearray()
            wire.iv(b, v)
            self.assertEqual(b.hex(), h)
        b = bytearray()
        wire.uv(b, 2 ** 64 - 1)
        self.assertEqual(b.hex(), "ffffffffffffffffff01")


class BrokenMemory:
    def _record_memory_history(self, **kw):
        raise RuntimeError("no device")

    def _snapshot(self):
        raise RuntimeError("no device")


class TestNeverRaises(unittest.TestCase):
    def test_broken_backend(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x", "y.sock")
            prod = p.Producer(interval=0.01, address="unix:" + path)
            prod._find_backend = lambda: BrokenMemory()
            prod.start()
            prod._thread.join(60)  # bounds a hang only
            self.assertFalse(prod._thread.is_alive())
            self.assertGreaterEqual(prod.errors, 1)
            self.assertFalse(prod.poll())
            self.assertFalse(os.path.exists(path), "the socket of a producer that never served is left")
            prod.stop()
            prod.stop()

    def test_module_functions(self):
        self.assertEqual(p.stats(), {})
        self.assertFalse(p.poll())
        p.stop()

    def test_addresses(self):
        self.assertEqual(p.parse_addr("unix:/a/b.sock"), ("unix", "/a/b.sock"))
        self.assertEqual(p.parse_addr(":7787"), ("tcp", ("127.0.0.1", 7787)))
        self.assertEqual(p.parse_addr("tcp:h:1"), ("tcp", ("h", 1)))
        self.assertEqual(p._duration("100ms"), 0.1)
        self.assertEqual(p._duration("2"), 2.0)



class TestSocketPath(unittest.TestCase):
    """The rules of wire.Listen and wire.CheckSocketDir."""

    def test_only_stale_sockets_are_replaced(self):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "notes.txt")
            with open(f, "w") as fh:
                fh.write("keep me")
            sub = os.path.join(d, "empty")
            os.mkdir(sub)
            for path in (f, sub):
                with self.assertRaisesRegex(RuntimeError, "not a socket"):
                    p.prepare_socket_path(path)
            with open(f) as fh:
                self.assertEqual(fh.read(), "keep me")
            self.assertTrue(os.path.isdir(sub))
            sock = os.path.join(d, "s.sock")
            live = socket.socket(socket.AF_UNIX)
            live.bind(sock)
            live.listen(1)
            with self.assertRaisesRegex(RuntimeError, "another producer"):
                p.prepare_socket_path(sock)
            live.close()  # the file stays: a stale socket
            p.prepare_socket_path(sock)
            self.assertFalse(os.path.exists(sock))

    def test_stopping_producer_leaves_a_successors_socket(self):
        """A producer restarted on the same path while the old one still
        waits for its clients' writers to finish keeps its socket: the old
        one gives up the path when it stops listening, never later."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.sock")
            old = p.Producer(interval=1, address="unix:" + path)
            old.server.bind()
            release = threading.Event()

            class Writing:  # a client whose writer thread has not finished
                sock = socket.socket(socket.AF_UNIX)
                thread = threading.Thread(target=release.wait, daemon=True)

                def push(self, *a, **kw):
                    pass

                def close(self):
                    pass

            w = Writing()
            w.thread.start()
            old.server.clients.append(w)
            stopping = threading.Thread(target=old.server.shutdown, args=(60,), daemon=True)
            stopping.start()

            def listening():
                c = socket.socket(socket.AF_UNIX)
                try:
                    c.connect(path)
                    return True
                except OSError:
                    return False
                finally:
                    c.close()

            deadline = time.monotonic() + 20
            while listening():
                self.assertLess(time.monotonic(), deadline, "the old producer still listens")
                time.sleep(0.002)
            succ = p.Producer(interval=1, address="unix:" + path)
            succ.server.bind()
            try:
                release.set()
                stopping.join(20)
                self.assertFalse(stopping.is_alive())
                self.assertTrue(listening(), "the successor's socket is gone")
            finally:
                succ.server.shutdown(1)
            self.assertFalse(os.path.exists(path))

    def test_client_joining_as_the_job_stops_gets_its_goodbye(self):
        """A client that joins while the job stops is sent its state and
        BYE before stop() returns: the job exits right after, taking the
        daemon writer threads with it. Its writer thread here starts
        slowly, so that stop() comes while the client joins."""

        class Idle:  # an allocator with nothing in it
            def _record_memory_history(self, **kw):
                pass

            def _snapshot(self):
                return {"segments": [], "device_traces": []}

        joining = threading.Event()

        class SlowStart(threading.Thread):
            def start(self):
                joining.set()
                time.sleep(0.2)
                super().start()

        class SlowClient(server.Client):
            def __init__(self, *a):
                super().__init__(*a)
                self.thread = SlowStart(target=self._run, daemon=True)

        orig, server.Client = server.Client, SlowClient
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.sock")
            prod = p.Producer(interval=3600, address="unix:" + path)
            prod._find_backend = lambda: Idle()
            try:
                prod.start()
                deadline = time.monotonic() + 20
                while not prod.stats()["serving"]:
                    self.assertEqual(prod.errors, 0)
                    self.assertLess(time.monotonic(), deadline, "the producer never served")
                    time.sleep(0.002)
                c = socket.socket(socket.AF_UNIX)
                c.connect(path)
                self.assertTrue(joining.wait(20), "the producer never took the client")
                prod.stop(timeout=20)  # while the client's writer starts
            finally:
                server.Client = orig
            self.assertEqual(prod.errors, 0)
            c.setblocking(False)  # all of it is here already, or it never will be
            got = bytearray()
            while True:
                try:
                    chunk = c.recv(1 << 16)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                got += chunk
            c.close()
            bye = bytearray()
            wire.bye(bye, "producer exiting")
            self.assertTrue(got.endswith(bye), "the client got %d bytes without BYE" % len(got))

    def test_socket_dir_must_be_ours_0700(self):
        with tempfile.TemporaryDirectory() as base:
            good = os.path.join(base, "new")
            p.check_socket_dir(good)
            self.assertEqual(os.stat(good).st_mode & 0o777, 0o700)
            loose = os.path.join(base, "loose")
            os.mkdir(loose)
            os.chmod(loose, 0o777)
            with self.assertRaisesRegex(RuntimeError, "mode 0777"):
                p.check_socket_dir(loose)
            link = os.path.join(base, "link")
            os.symlink(good, link)
            with self.assertRaisesRegex(RuntimeError, "not a directory"):
                p.check_socket_dir(link)
            if os.getuid() == 0:
                other = os.path.join(base, "other")
                os.mkdir(other, 0o700)
                os.chown(other, 12345, 12345)
                with self.assertRaisesRegex(RuntimeError, "belongs to uid 12345"):
                    p.check_socket_dir(other)


if __name__ == "__main__":
    unittest.main()
