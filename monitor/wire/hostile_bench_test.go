package wire

import (
	"context"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/store"
)

// BenchmarkServerCloseStuck16 reports how long Close takes with 16 clients
// that stopped reading while 500k entries were published (close-ms), and
// the heap the server held for them (held-KiB).
func BenchmarkServerCloseStuck16(b *testing.B) {
	ents := testEntries(1000, 7)
	var closeTotal time.Duration
	var held int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := wiretest.ShortSock(b)
		srv, err := Listen("unix", path, ServerOptions{Heartbeat: time.Hour, Logf: func(string, ...any) {}})
		if err != nil {
			b.Fatal(err)
		}
		conns := stuckClients(b, path, 16)
		for srv.Stats().Clients != 16 {
			time.Sleep(time.Millisecond)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 500 {
			srv.Publish(0, ents)
		}
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&after)
		held += int64(after.HeapInuse) - int64(before.HeapInuse)
		b.StartTimer()
		start := time.Now()
		srv.Close()
		closeTotal += time.Since(start)
		for _, c := range conns {
			c.Close()
		}
	}
	b.ReportMetric(float64(closeTotal.Milliseconds())/float64(b.N), "close-ms")
	b.ReportMetric(float64(held>>10)/float64(b.N), "held-KiB")
}

// BenchmarkClientHeapPerEntry: what one stored entry costs an attached
// client (heap-B/entry); ClientLimits.Entries times it bounds a session.
func BenchmarkClientHeapPerEntry(b *testing.B) {
	const n = 1 << 20
	e := &enc{texts: testTexts}
	ents := testEntries(32768, 1)
	for i := range ents {
		ents[i].CompileContext, ents[i].UserMetadata = snapshot.NoText, snapshot.NoText
	}
	span := ents[len(ents)-1].TimeUS - ents[0].TimeUS + 1
	for i := 0; i < n; i += len(ents) {
		encodeEntries(e, 0, uint64(i), ents) // alloc/free pairs: a bounded live set, as in a job
		for j := range ents {
			ents[j].TimeUS += span
		}
	}
	data := append(validPrefix(), e.b...)
	for i := 0; i < b.N; i++ {
		path := wiretest.ShortSock(b)
		ln, err := net.Listen("unix", path)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Write(data)
				c.Close()
			}
		}()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		st := store.New(store.Options{})
		cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true})
		cl.Run(context.Background())
		runtime.GC()
		runtime.ReadMemStats(&after)
		ln.Close()
		if st.Len(0) != n {
			b.Fatalf("stored %d", st.Len(0))
		}
		b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/n, "heap-B/entry")
		runtime.KeepAlive(st)
	}
}
