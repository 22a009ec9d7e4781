package metrics

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestServeFloodKeepsDescriptors: 1,100 idle connections to /metrics
// (half never send a request, half are keep-alives after one) leave the
// server holding at most MaxConns of them; scrapes still succeed and a
// Unix listener in the same process (the wire's) still accepts, under a
// descriptor limit the flood would have exhausted without the cap.
func TestServeFloodKeepsDescriptors(t *testing.T) {
	const flood = 1100
	base := openFDs(t)
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// room for the test's own 1,100 ends, the server's cap and some slack:
	// not for the server's ends of all 1,100 as well
	lim := old
	lim.Cur = uint64(base + flood + MaxConns + 150)
	if lim.Cur > old.Max {
		t.Skipf("descriptor limit %d too low", old.Max)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)

	s, err := Serve("127.0.0.1:0", New(Target{Store: captureStore(t), Rank: -1, PID: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.Addr().String()
	wl, err := net.Listen("unix", filepath.Join(t.TempDir(), "wire.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < flood; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if i%2 == 1 { // a keep-alive: one request, then idle
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.ln.held() > MaxConns {
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d connections, cap %d", s.ln.held(), MaxConns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := openFDs(t) - base - flood; got > MaxConns+64 {
		t.Fatalf("the server side of the flood holds %d descriptors (cap %d)", got, MaxConns)
	}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 0; i < 20; i++ {
		resp, err := cl.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("scrape %d under the flood: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(body) == 0 {
			t.Fatalf("scrape %d: %s, %d bytes", i, resp.Status, len(body))
		}
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := wl.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	wc, err := net.Dial("unix", wl.Addr().String())
	if err != nil {
		t.Fatalf("the wire listener under the flood: %v", err)
	}
	wc.Close()
	if err := <-accepted; err != nil {
		t.Fatalf("the wire listener under the flood: %v", err)
	}
	t.Logf("held %d of %d flood connections; evicted %d, refused %d", s.ln.held(), flood, s.ln.evicted, s.ln.refused)
}

// TestServeLimitsSet: the timeouts that drop idle, slow and non-reading
// clients are set.
func TestServeLimitsSet(t *testing.T) {
	s, err := Serve("127.0.0.1:0", New(Target{Store: captureStore(t), Rank: -1, PID: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.srv.IdleTimeout != IdleTimeout || s.srv.WriteTimeout != WriteTimeout || s.srv.ReadTimeout != ReadTimeout {
		t.Fatalf("timeouts %v %v %v", s.srv.IdleTimeout, s.srv.WriteTimeout, s.srv.ReadTimeout)
	}
	// a client that sends nothing is closed after ReadHeaderTimeout; one
	// that stops halfway through its headers too (ReadTimeout)
	if s.srv.ReadHeaderTimeout == 0 || s.srv.ReadHeaderTimeout > ReadTimeout {
		t.Fatalf("ReadHeaderTimeout %v", s.srv.ReadHeaderTimeout)
	}
}
