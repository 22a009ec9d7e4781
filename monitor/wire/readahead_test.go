package wire

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/store"
)

// stallConsumer makes every client's processing wait (takeHook) until the
// returned release is called; the test's cleanup releases it too.
func stallConsumer(t *testing.T) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	var released atomic.Bool
	takeHook = func() { <-gate }
	release = func() {
		if released.CompareAndSwap(false, true) {
			close(gate)
		}
	}
	t.Cleanup(func() {
		release()
		takeHook = nil
	})
	return release
}

// A client whose processing is stalled (a starved Store goroutine) keeps
// reading its socket into the read-ahead, up to its bound: a producer
// writing a stream smaller than the bound gets it all taken off its hands
// while nothing is processed, and once the consumer runs again every
// entry is there, in order, none missed.
func TestClientStalledConsumerLosesNothing(t *testing.T) {
	defer func(b int64) { readAheadBytes = b }(readAheadBytes)
	readAheadBytes = 16 << 20
	path := wiretest.ShortSock(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const n = 200_000
	ents := liveEntries(n)
	e := &enc{texts: testTexts}
	encodeHello(e, &Hello{Version: ProtocolVersion, PID: 1, Host: "t", ClockSource: "realtime"})
	encodeSnapshot(e, nil, map[int]uint64{0: 0})
	for i := 0; i < n; i += 1000 { // 200 frames of 1,000 entries
		encodeEntries(e, 0, uint64(i), ents[i:i+1000])
	}
	stream := e.b
	written := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			written <- err
			return
		}
		defer c.Close()
		// a small kernel buffer: the stream can only go to the client's read-ahead
		c.(*net.UnixConn).SetWriteBuffer(16 << 10)
		_, err = c.Write(stream)
		written <- err
		<-done
	}()
	release := stallConsumer(t)
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true, Silence: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { cl.Run(ctx); close(ran) }()
	defer func() { release(); cancel(); <-ran }()
	// the producer's write completes although nothing was processed
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the producer's write did not complete while the consumer stalled: read-ahead holds %+v of a %d-byte stream", cl.readAheadStats(), len(stream))
	}
	if st.Len(0) != 0 || cl.Status().Entries != 0 {
		t.Fatalf("entries were processed while the consumer stalled: %d", st.Len(0))
	}
	// all but what the kernel and the bufio reader hold is in the read-ahead
	if s := cl.readAheadStats(); s.Held < int64(len(stream))-1<<20 || s.Peak > readAheadBytes {
		t.Fatalf("read-ahead holds %+v, want ≥ %d bytes of the stream and ≤ the bound %d", s, len(stream)-1<<20, readAheadBytes)
	}
	release()
	poll.Until(t, "every entry", func() bool { return cl.Status().Entries == n })
	s := cl.Status()
	if s.Missed != 0 || s.Gaps != 0 || st.Len(0) != n {
		t.Fatalf("missed %d, gaps %d, held %d; want 0, 0, %d", s.Missed, s.Gaps, st.Len(0), n)
	}
	evs := st.EventsAroundSeq(0, 0, 0, n)
	for i := range evs {
		got, want := evs[i].TraceEntry, ents[i]
		if got.Addr != want.Addr || got.TimeUS != want.TimeUS || got.Action != want.Action || got.Size != want.Size {
			t.Fatalf("entry %d: %+v, want %+v", i, got, want)
		}
	}
}

// Past its bound the read-ahead stops reading: the socket fills, the
// producer's queue drops the oldest entries for this client and says so
// with a GAP, and the client counts them as missed, as before the
// read-ahead. Every entry published is received or counted missed, and
// the read-ahead never held more than its bound (and one frame).
func TestClientStalledPastBoundCountsDrops(t *testing.T) {
	defer func(b int64) { readAheadBytes = b }(readAheadBytes)
	readAheadBytes = 256 << 10
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, ServerOptions{QueueBytes: 256 << 10, SocketBuffer: 16 << 10,
		WriteTimeout: time.Minute, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	release := stallConsumer(t)
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true, Silence: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { cl.Run(ctx); close(ran) }()
	defer func() { release(); cancel(); <-ran }()
	poll.Until(t, "a client", func() bool { return srv.Stats().Clients == 1 })
	live := wiretest.NewLive()
	t0 := int64(1_750_000_000_000_000)
	srv.Publish(0, []snapshot.TraceEntry{live.Segment(t0)})
	const n = 400_000 // ≈ 5 MB encoded: many times the read-ahead, the queue and the socket
	batch := make([]snapshot.TraceEntry, 1000)
	for i := 0; i < n; i += len(batch) {
		for j := range batch {
			batch[j] = live.Next(t0 + int64(i+j))
		}
		srv.Publish(0, batch)
	}
	poll.Until(t, "the producer dropping entries", func() bool { return srv.Stats().Dropped > 0 })
	release()
	const published = n + 1
	poll.Until(t, "every entry received or missed", func() bool {
		s := cl.Status()
		return s.Entries+s.Missed >= published
	})
	s := cl.Status()
	if s.Entries+s.Missed != published || s.Missed == 0 || s.Gaps == 0 {
		t.Fatalf("received %d + missed %d (gaps %d), want %d published, some missed", s.Entries, s.Missed, s.Gaps, published)
	}
	if d := srv.Stats().Dropped; d != s.Missed {
		t.Fatalf("the producer dropped %d, the client counted %d missed", d, s.Missed)
	}
	// a frame larger than the bound passes alone; these are ≤ 8,192 entries
	if p := cl.readAheadStats().Peak; p > readAheadBytes {
		t.Fatalf("read-ahead peaked at %d bytes, bound %d", p, readAheadBytes)
	}
}

// The reading goroutine decodes at most decodeAhead ENTRIES frames ahead
// (the rest wait encoded), each exactly as the Store goroutine's decoder
// would, and a decoded frame's buffers are reused once it is done.
func TestReadAheadPredecodeBounded(t *testing.T) {
	ra := newReadAhead()
	defer ra.stop()
	ents := liveEntries(5000)
	var frames [][]byte
	for i := 0; i < len(ents); i += 500 {
		e := &enc{texts: testTexts}
		encodeEntries(e, 0, uint64(i), ents[i:i+500])
		frames = append(frames, e.b[5:]) // the payload, past the frame header
	}
	for _, p := range frames {
		f := readFrame{typ: frameEntries, p: p}
		ra.predecode(&f)
		if !ra.put(f) {
			t.Fatal("put refused")
		}
	}
	var reused *decoded
	for i := range frames {
		f, ok := ra.take()
		if !ok {
			t.Fatal("take refused")
		}
		if (f.dec != nil) != (i < decodeAhead) {
			t.Fatalf("frame %d: decoded ahead %v, want only the first %d", i, f.dec != nil, decodeAhead)
		}
		if f.dec != nil {
			dev, first, want, _, err := decodeEntriesNamed(f.p, nil, nil, nil, nil)
			if err != nil || f.dec.dev != dev || f.dec.first != first || !slices.Equal(f.dec.ents, want) {
				t.Fatalf("frame %d decoded ahead differs from the decoder's: %v", i, err)
			}
			reused = f.dec
		}
		ra.done(f)
	}
	// with nothing outstanding the next frame is decoded, into a buffer of a done one
	f := readFrame{typ: frameEntries, p: frames[0]}
	ra.predecode(&f)
	if f.dec == nil || f.dec != reused {
		t.Fatalf("decoded ahead %v into %p, want the done frame's buffers %p", f.dec != nil, f.dec, reused)
	}
}

// Frames are read into slabs one after the other, each costing its length;
// while a backlog is queued, a slab whose frames are all done is read into
// again instead of a fresh one (fresh memory costs a page fault every 4
// KiB); no frame's bytes are overwritten before it is done; and once the
// backlog drains the idle slabs kept shrink to readAheadPool.
func TestReadAheadSlabsReused(t *testing.T) {
	defer func(b int64) { readAheadBytes = b }(readAheadBytes)
	readAheadBytes = 32 << 20 // slabs of 1 MiB, 8 MiB of them kept idle
	ra := newReadAhead()
	defer ra.stop()
	const size = 50_000
	next := uint64(0)
	put := func() {
		b := ra.buffer()
		if cap(b) < size {
			b = ra.alloc(size)
		}
		p := b[:size]
		for i := range p {
			p[i] = byte(next + uint64(i))
		}
		binary.LittleEndian.PutUint64(p, next)
		next++
		f := readFrame{typ: frameHeartbeat, p: p}
		ra.place(&f)
		if f.slab == nil || cap(f.p) != size {
			t.Fatalf("frame %d not placed in a slab (cap %d)", next-1, cap(f.p))
		}
		if !ra.put(f) {
			t.Fatal("put refused")
		}
	}
	want := uint64(0)
	take := func() {
		f, ok := ra.take()
		if !ok {
			t.Fatal("take refused")
		}
		if got := binary.LittleEndian.Uint64(f.p); got != want || f.p[size-1] != byte(want+size-1) {
			t.Fatalf("frame %d overwritten (reads as %d)", want, got)
		}
		want++
		ra.done(f)
	}
	for range 400 { // a backlog of 20 MB
		put()
	}
	if held := ra.stats().Held; held != 400*(size+frameOverhead) {
		t.Fatalf("400 frames of %d bytes held %d bytes", size, held)
	}
	for range 400 { // the backlog stays (and one slab more fills while the oldest empties)
		take()
		put()
	}
	made := ra.slabs
	for range 4000 { // 200 MB more pass through it
		take()
		put()
	}
	if ra.slabs != made {
		t.Fatalf("%d slabs allocated while the backlog stayed, want none (%d before)", ra.slabs-made, made)
	}
	for range 400 {
		take()
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.pooled > readAheadPool() {
		t.Fatalf("%d bytes of idle slabs kept after the backlog drained, want ≤ %d", ra.pooled, readAheadPool())
	}
}
