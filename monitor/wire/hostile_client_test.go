package wire

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/internal/testutil/wiretest"
)

// Hostile clients: the producer (inside the instrumented job) never waits
// on them, holds bounded memory for them, and shuts down promptly.

// logLines collects a server's Logf lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(f string, a ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
	l.mu.Unlock()
}

func (l *logLines) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// stuckClients connects n clients that read the HELLO and then nothing.
func stuckClients(t testing.TB, path string, n int) []net.Conn {
	var conns []net.Conn
	for range n {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		(&frameReader{r: c}).next()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// Clients that never read: Publish goes on, the server's memory stays
// bounded by its queue, the clients are disconnected after WriteTimeout
// (logged), and Close returns promptly.
func TestHostileStuckClients(t *testing.T) {
	path := wiretest.ShortSock(t)
	var log logLines
	// the system's socket buffers, which fill at once (the default ones
	// are TestHostileStuckClientSocketBuffer's); the write timeout leaves
	// a slow (race-detector) build time to overflow the queue first
	// a queue of 4 MiB (≈ 250,000 encoded entries) overflows well within
	// that time too
	srv, err := Listen("unix", path, ServerOptions{Heartbeat: time.Hour, WriteTimeout: 2 * time.Second, Logf: log.logf, SocketBuffer: -1,
		QueueBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	stuckClients(t, path, 16)
	poll.Until(t, "16 clients", func() bool { return srv.Stats().Clients == 16 })
	ents := testEntries(1000, 7)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 2000 { // 2M entries, far more than the queue and the sockets hold
		srv.Publish(0, ents)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapInuse) - int64(before.HeapInuse)
	if held > 64<<20 {
		t.Fatalf("server holds %d MiB more with 16 stuck clients", held>>20)
	}
	t.Logf("heap held with 16 stuck clients after 2M entries: %d KiB", held>>10)
	poll.Until(t, "stuck clients dropped", func() bool { return srv.Stats().Stalled == 16 && srv.Stats().Clients == 0 })
	poll.Until(t, "a log line for the dropped clients", func() bool { return log.has("took no data") })
	poll.Until(t, "a log line for entries dropped", func() bool { return log.has("fell behind") })
	if srv.Stats().Dropped == 0 {
		t.Fatal("drops for slow clients were not counted")
	}
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d > 4*time.Second { // Close gives up after 1.5 s; the slack is for a loaded machine
		t.Fatalf("Close took %v", d)
	}
}

// A client that stops reading is disconnected with the default socket
// buffer too (SocketBuffer: more room in the kernel, filled later).
func TestHostileStuckClientSocketBuffer(t *testing.T) {
	path := wiretest.ShortSock(t)
	var log logLines
	srv, err := Listen("unix", path, ServerOptions{Heartbeat: time.Hour, WriteTimeout: 300 * time.Millisecond, Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stuckClients(t, path, 1)
	poll.Until(t, "a client", func() bool { return srv.Stats().Clients == 1 })
	ents := testEntries(1000, 7)
	deadline := time.Now().Add(30 * time.Second)
	for srv.Stats().Stalled == 0 && time.Now().Before(deadline) {
		srv.Publish(0, ents)
		time.Sleep(50 * time.Microsecond)
	}
	poll.Until(t, "the stuck client dropped", func() bool { return srv.Stats().Stalled == 1 && srv.Stats().Clients == 0 })
	poll.Until(t, "a log line for the dropped client", func() bool { return log.has("took no data") })
}

// writeWatch is a listener whose connections count the writes under way
// on them: a server's client writer blocked on a client that does not read
// shows as a write that does not end.
type writeWatch struct {
	net.Listener
	mu    sync.Mutex
	conns []*watchedConn
}

type watchedConn struct {
	net.Conn
	writing atomic.Int32
}

func (c *watchedConn) Write(b []byte) (int, error) {
	c.writing.Add(1)
	defer c.writing.Add(-1)
	return c.Conn.Write(b)
}

func (l *writeWatch) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	w := &watchedConn{Conn: c}
	l.mu.Lock()
	l.conns = append(l.conns, w)
	l.mu.Unlock()
	return w, nil
}

// allWriting reports whether n connections were accepted and each has a
// write under way.
func (l *writeWatch) allWriting(n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) != n {
		return false
	}
	for _, c := range l.conns {
		if c.writing.Load() == 0 {
			return false
		}
	}
	return true
}

// Close with clients that stopped reading (a WriteTimeout longer than the
// shutdown) is over within two seconds.
func TestHostileShutdownWithStuckClients(t *testing.T) {
	path := wiretest.ShortSock(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ww := &writeWatch{Listener: ln}
	// an hour: no writer gives up on its own, however long the machine
	// takes to get them all stuck
	srv := Serve(ww, ServerOptions{Heartbeat: time.Hour, WriteTimeout: time.Hour, Logf: func(string, ...any) {}})
	stuckClients(t, path, 16)
	poll.Until(t, "clients", func() bool { return srv.Stats().Clients == 16 })
	ents := testEntries(1000, 7)
	// publish until every client's writer is stuck in a write that its
	// client does not take
	poll.Until(t, "16 blocked writes", func() bool {
		for range 50 {
			srv.Publish(0, ents)
		}
		return ww.allWriting(16)
	})
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d > 4*time.Second { // Close gives up after 1.5 s; the slack is for a loaded machine
		t.Fatalf("Close took %v with stuck clients", d)
	}
}

// Past MaxClients a client gets a BYE that says why.
func TestHostileClientCap(t *testing.T) {
	path := wiretest.ShortSock(t)
	var log logLines
	srv, err := Listen("unix", path, ServerOptions{MaxClients: 2, Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stuckClients(t, path, 2)
	poll.Until(t, "2 clients", func() bool { return srv.Stats().Clients == 2 })
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, p, err := (&frameReader{r: c}).next()
	if err != nil || typ != frameBye {
		t.Fatalf("third client got frame %d, %v; want BYE", typ, err)
	}
	if reason, _ := decodeBye(p); !strings.Contains(reason, "too many clients") {
		t.Fatalf("BYE %q", reason)
	}
	poll.Until(t, "the refusal logged", func() bool { return log.has("refused 1 client") })
	if srv.Stats().Refused != 1 {
		t.Fatalf("refusal not counted: %+v", srv.Stats())
	}
}

// sim --listen unix:PATH: only a stale socket is replaced; a file, a
// directory or a live socket at PATH is left alone.
func TestListenLeavesNonSocketsAlone(t *testing.T) {
	dir := t.TempDir()
	quiet := ServerOptions{Logf: func(string, ...any) {}}
	file := filepath.Join(dir, "precious.txt")
	os.WriteFile(file, []byte("data"), 0o644)
	sub := filepath.Join(dir, "emptydir")
	os.Mkdir(sub, 0o755)
	for _, p := range []string{file, sub} {
		if srv, err := Listen("unix", p, quiet); err == nil {
			srv.Close()
			t.Fatalf("listened over %s", p)
		} else if !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "data" {
		t.Fatal("regular file touched")
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Fatal("directory removed")
	}
	// a stale socket (its listener gone without cleaning up) is replaced
	sock := wiretest.ShortSock(t)
	ln, _ := net.Listen("unix", sock)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	srv, err := Listen("unix", sock, quiet)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	// a live one is not
	if s2, err := Listen("unix", sock, quiet); err == nil || !strings.Contains(err.Error(), "another producer") {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second producer on a live socket: %v", err)
	}
	srv.Close()
}

// The default socket directory must be ours with mode 0700.
func TestCheckSocketDir(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "npumon-new")
	if err := CheckSocketDir(good, true); err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	if fi, _ := os.Stat(good); fi.Mode().Perm() != 0o700 {
		t.Fatalf("created with mode %o", fi.Mode().Perm())
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if err := CheckSocketDir(open, true); err == nil || !strings.Contains(err.Error(), "mode 0777") {
		t.Errorf("world-writable directory: %v", err)
	}
	link := filepath.Join(base, "link")
	os.Symlink(good, link)
	if err := CheckSocketDir(link, true); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("symlink: %v", err)
	}
	if os.Getuid() == 0 { // another user's directory (needs chown)
		other := filepath.Join(base, "other")
		os.Mkdir(other, 0o700)
		if err := os.Chown(other, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if err := CheckSocketDir(other, true); err == nil || !strings.Contains(err.Error(), "belongs to uid 12345") {
			t.Errorf("another user's directory: %v", err)
		}
	}
	// Listen on the default path refuses a planted directory
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", base)
	os.Mkdir(DefaultSocketDir(), 0o755)
	os.Chmod(DefaultSocketDir(), 0o755)
	if srv, err := Listen("unix", "", ServerOptions{Logf: func(string, ...any) {}}); err == nil {
		srv.Close()
		t.Fatal("listened in a 0755 socket directory")
	}
}

// A listener reachable from other hosts is announced with a warning.
func TestListenWarnsOffLoopback(t *testing.T) {
	var log logLines
	srv, err := Listen("tcp", "127.0.0.1:0", ServerOptions{Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if log.has("warning") {
		t.Fatal("warned for loopback")
	}
	srv, err = Listen("tcp", "0.0.0.0:0", ServerOptions{Logf: log.logf})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if !log.has("warning: serving on 0.0.0.0") || !log.has("stack frames") {
		t.Fatalf("no warning for 0.0.0.0: %v", log.lines)
	}
}

// TestCloseDoesNotWaitForStuckClients: clients stuck in a write for
// longer than closeGrace when Close begins are closed at once, instead of
// holding the exit for another grace (sim's SIGTERM took 1–3 s with 16).
func TestCloseDoesNotWaitForStuckClients(t *testing.T) {
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, ServerOptions{Heartbeat: time.Hour, Logf: func(string, ...any) {}, SocketBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	stuckClients(t, path, 16)
	poll.Until(t, "16 clients", func() bool { return srv.Stats().Clients == 16 })
	ents := testEntries(1000, 7)
	for range 200 { // far more than the sockets hold: every writer blocks
		srv.Publish(0, ents)
	}
	time.Sleep(closeGrace + 300*time.Millisecond) // stuck longer than the grace, well within WriteTimeout
	if n := srv.Stats().Clients; n != 16 {
		t.Fatalf("%d clients before Close, want 16", n)
	}
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d >= closeGrace*7/10 { // it used to wait the whole grace
		t.Fatalf("Close took %v with 16 clients stuck for longer than closeGrace", d)
	}
}
