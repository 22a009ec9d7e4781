package attach

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor/wire"
)

// BenchmarkServeMallocFreeStalled16: the client cap's worth of clients that
// stopped reading must not slow the allocator (compare NoClient).
func BenchmarkServeMallocFreeStalled16(b *testing.B) { benchServeMallocFree(b, 16) }

// BenchmarkServeMallocFreeReading16: 16 clients reading at full rate; the
// allocator pays one copy per entry, not one per client.
func BenchmarkServeMallocFreeReading16(b *testing.B) {
	allocs, _ := newAllocators(b, 1)
	dir, _ := filepathTemp()
	defer removeAll(dir)
	path := dir + "/s.sock"
	srv, stop, err := Serve("unix", path, allocs, wire.ServerOptions{Logf: func(string, ...any) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for range 16 {
		c, err := net.Dial("unix", path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		go io.Copy(io.Discard, c)
	}
	for srv.Stats().Clients != 16 {
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
