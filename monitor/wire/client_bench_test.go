package wire

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/store"
)

// liveEntries is the pattern e2e's BenchmarkLiveAttach publishes
// (wiretest.Live), 1,000 entries per µs of time.
func liveEntries(n int) []snapshot.TraceEntry {
	out := make([]snapshot.TraceEntry, n)
	t0 := int64(1_750_000_000_000_000)
	l := wiretest.NewLive()
	out[0] = l.Segment(t0)
	for i := 1; i < n; i++ {
		out[i] = l.Next(t0 + int64(i/1000))
	}
	return out
}

// BenchmarkClientIngest measures what an attach spends per entry on its
// side of a Unix socket: reading, decoding and storing ENTRIES frames of
// the live benchmark's pattern (4,096 entries each, as the server sends
// them). The frames are encoded before the clock starts and written by
// a plain writer, so the figure is the client's (cpu-ns/op counts the
// writer's one write per 256 KiB too). Use -benchtime Nx: the stream is
// encoded whole beforehand.
func BenchmarkClientIngest(b *testing.B) { benchClientIngest(b, store.Options{}) }

// BenchmarkClientIngestRetained is ClientIngest into a Store with attach's
// default retention window (store.DefaultRetention): past the first
// million entries every chunk appended replaces one thinned.
func BenchmarkClientIngestRetained(b *testing.B) {
	benchClientIngest(b, store.Options{Retain: store.DefaultRetention})
}

func benchClientIngest(b *testing.B, benchStoreOptions store.Options) {
	path := wiretest.ShortSock(b)
	ln, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	const frame = 4096
	ents := liveEntries(b.N)
	done := make(chan struct{})
	defer close(done)
	stacks := make([]snapshot.Stack, 8)
	ids := make([]snapshot.StackID, 8)
	for i := range stacks {
		ids[i] = snapshot.StackID(i)
		stacks[i] = snapshot.Stack{{Filename: "train.py", Line: int64(10 + i), Name: "step"}}
	}
	// the stream, cut into chunks of whole frames
	var chunks [][]byte
	e := &enc{texts: testTexts}
	for i := 0; i < len(ents); i += frame {
		encodeEntries(e, 0, uint64(i), ents[i:min(i+frame, len(ents))])
		if len(e.b) >= 256<<10 {
			chunks = append(chunks, e.b)
			e = &enc{texts: testTexts}
		}
	}
	if len(e.b) > 0 {
		chunks = append(chunks, e.b)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		h := &enc{texts: testTexts}
		encodeHello(h, &Hello{Version: ProtocolVersion, PID: 1, Host: "bench", ClockSource: "realtime"})
		encodeStacks(h, ids[1:], stacks[1:])
		encodeSnapshot(h, nil, map[int]uint64{0: 0})
		if _, err := c.Write(h.b); err != nil {
			return
		}
		for _, ch := range chunks {
			if _, err := c.Write(ch); err != nil {
				return
			}
		}
		<-done
	}()
	st := store.New(benchStoreOptions)
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true, Limits: ClientLimits{Entries: 1 << 40}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for cl.Status().Entries < uint64(b.N) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	benchcpu.Report(b, c0, float64(b.N), "entries/cpu-s")
}

// The read-ahead's byte budget is given back frame by frame: many more
// frames than it holds at once pass through it, tiny ones too.
func TestClientReadAheadBudget(t *testing.T) {
	defer func(b int64) { readAheadBytes = b }(readAheadBytes)
	readAheadBytes = 4096
	path := wiretest.ShortSock(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ents := liveEntries(3000)
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		e := &enc{texts: testTexts}
		encodeHello(e, &Hello{Version: ProtocolVersion, PID: 1, Host: "t", ClockSource: "realtime"})
		encodeSnapshot(e, nil, map[int]uint64{0: 0})
		for i := range 20000 {
			encodeHeartbeat(e, int64(i), nil)
		}
		for i := 0; i < len(ents); i += 100 { // 100 entries (some 1.3 KB) a frame
			encodeEntries(e, 0, uint64(i), ents[i:i+100])
		}
		c.Write(e.b)
		<-done
	}()
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { cl.Run(ctx); close(ran) }()
	// stop the client before the deferred restore writes readAheadBytes
	defer func() { cancel(); <-ran }()
	poll.Until(t, "every entry", func() bool { return cl.Status().Entries == uint64(len(ents)) })
}
