package attach

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/wire"
)

// BenchmarkServeMallocFreeStalled16: the client cap's worth of clients that
// stopped reading must not slow the allocator (compare NoClient).
func BenchmarkServeMallocFreeStalled16(b *testing.B) { benchServeMallocFree(b, 16) }

// BenchmarkServeMallocFreeReading16: 16 clients reading at full rate; the
// allocator pays one copy per entry, not one per client.
func BenchmarkServeMallocFreeReading16(b *testing.B) {
	benchServe(b, 16, wire.ServerOptions{}, func(c net.Conn) { go io.Copy(io.Discard, c) })
}

// benchServe runs Malloc/Free pairs on an allocator served over the wire
// under opts, with clients connected, each handed to client once dialled.
// ns/op is one pair; "dropped" is what the server dropped for slow
// clients.
func benchServe(b *testing.B, clients int, opts wire.ServerOptions, client func(net.Conn)) {
	allocs, _ := newAllocators(b, 1)
	path := wiretest.ShortSock(b)
	opts.Logf = func(string, ...any) {}
	srv, stop, err := Serve("unix", path, allocs, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for range clients {
		c, err := net.Dial("unix", path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		client(c)
	}
	for srv.Stats().Clients != clients {
		time.Sleep(time.Millisecond)
	}
	a := allocs[0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := a.Malloc(4096, 0)
		if err != nil {
			b.Fatal(err)
		}
		a.Free(p)
	}
	b.StopTimer()
	b.ReportMetric(float64(srv.Stats().Dropped), "dropped")
}
