package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/store"
)

// testActions names the unknown action testEntries uses.
var testActions = snapshot.NewActionTable()

// testTexts holds the strings testEntries names.
var testTexts = snapshot.NewTextTable()

func testEntries(n int, seed uint64) []snapshot.TraceEntry {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]snapshot.TraceEntry, n)
	t := int64(1_750_000_000_000_000)
	for i := range out {
		t += r.Int64N(3)
		a := snapshot.ActionAlloc
		if i%2 == 1 {
			a = snapshot.ActionFreeCompleted
		}
		out[i] = snapshot.TraceEntry{Action: a, Addr: 0x1000 + uint64(i/2)*512, Size: 512, Stream: 3, TimeUS: t,
			Frames: snapshot.StackID(1 + i%3)}
	}
	if n < 12 {
		return out
	}
	out[5].Action = testActions.Parse("wire_test_custom")
	out[7].CompileContext = testTexts.Intern("N/A")
	out[9].UserMetadata = testTexts.Intern("meta")
	out[11].HasPoolID, out[11].PoolID = true, snapshot.PoolID{1, -2}
	return out
}

var testStacks = []snapshot.Stack{nil,
	{{Filename: "train.py", Line: 10, Name: "step"}},
	{{Filename: "model.py", Line: 20, Name: "forward"}, {Filename: "train.py", Line: 11, Name: "step"}},
	{{Filename: "x.py", Line: 1, Name: "<module>"}},
}

func stackOf(id snapshot.StackID) snapshot.Stack {
	if id > 0 && int(id) < len(testStacks) {
		return testStacks[id]
	}
	return nil
}

func initialSnapshot() *snapshot.Snapshot {
	return &snapshot.Snapshot{Stacks: testStacks, Segments: []snapshot.Segment{{Device: 0, Address: 0x1000, TotalSize: 64 << 20, Stream: 3, IsLarge: true,
		Blocks: []snapshot.Block{{Address: 0x1000, Size: 64 << 20}}}, {Device: 0, Address: 0x9000000, TotalSize: 2 << 20, Stream: 3,
		Blocks: []snapshot.Block{{Address: 0x9000000, Size: 4096, RequestedSize: 4000, State: snapshot.StateActiveAllocated, Frames: 2}, {Address: 0x9001000, Size: 2<<20 - 4096}}}}}
}

// Many entries end to end over a real Unix socket: none lost when the
// client keeps up, every field intact, stacks resolved.
func TestWireEndToEnd(t *testing.T) {
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, ServerOptions{
		Hello:    Hello{Devices: []store.DeviceInfo{{ID: 0, Name: "Ascend910B-sim", HBMTotal: 64 << 30, Streams: 2}}},
		Snapshot: func() (*snapshot.Snapshot, map[int]uint64) { return initialSnapshot(), nil },
		Stack:    stackOf,
		Actions:  testActions,
		Texts:    testTexts,
		Devices: func() []store.DeviceInfo {
			return []store.DeviceInfo{{ID: 0, HBMTotal: 64 << 30, HBMUsed: 123}}
		},
		Heartbeat: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	st := store.New(store.Options{})
	var mu sync.Mutex
	var states []ConnState
	cl := NewClient("unix", path, st, ClientOptions{OnStatus: func(s ClientStatus) {
		mu.Lock()
		states = append(states, s.State)
		mu.Unlock()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(ctx) }()
	poll.Until(t, "connected", func() bool { return cl.Status().State == ConnConnected })

	const n = 200_000
	ents := testEntries(n, 1)
	for i := 0; i < n; i += 1000 {
		srv.Publish(0, ents[i:i+1000])
		// a client that keeps up: the backlog stays below the queue bound
		poll.Until(t, "client to keep up", func() bool { return st.Len(0) > int64(i-30000) })
	}
	srv.PublishOps([]store.Op{{Name: "aten::mm", StartUS: 5, EndUS: 9, Seq: 1, Step: -1, Thread: 77}})
	poll.Until(t, "all entries", func() bool { return st.Len(0) == n })
	poll.Until(t, "ops", func() bool { return len(st.Ops(0, 100)) == 1 })
	poll.Until(t, "heartbeat", func() bool { di, _ := st.DeviceInfo(0); return di.HBMUsed == 123 })
	if di, _ := st.DeviceInfo(0); di.Name != "Ascend910B-sim" {
		t.Fatalf("device info %+v", di)
	}
	if g := st.Gaps(0); len(g) != 0 {
		t.Fatalf("gaps with a client that keeps up: %+v", g)
	}
	got := st.Events(0, -1<<62, 1<<62, 0)
	for i := range got {
		w := ents[i]
		g := got[i].TraceEntry
		if g.Frames != 0 {
			if !reflect.DeepEqual(st.Stack(g.Frames), testStacks[w.Frames]) {
				t.Fatalf("entry %d stack %v, want %v", i, st.Stack(g.Frames), testStacks[w.Frames])
			}
			g.Frames = w.Frames
		}
		if g != w {
			t.Fatalf("entry %d: %+v, want %+v", i, g, w)
		}
	}
	// an action the model does not know crosses by name into the Store's table
	if got[5].ActionName != "wire_test_custom" || st.ActionName(got[5].Action) != "wire_test_custom" {
		t.Fatalf("unknown action arrived as %q / %q", got[5].ActionName, st.ActionName(got[5].Action))
	}
	// the snapshot arrived: the pre-existing block is live at the start
	s0 := st.StateAt(0, got[0].Time-1)
	if len(s0.Segments) != 2 || st.Stack(s0.Segments[1].Blocks[0].Frames)[0].Name != "forward" {
		t.Fatalf("initial state %+v", s0.Segments)
	}
	if c := cl.Status(); c.Entries != n || c.Hello == nil || c.Hello.PID == 0 || c.Hello.Version != ProtocolVersion {
		t.Fatalf("client status %+v", c)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if states[0] != ConnConnecting || states[1] != ConnConnected || states[len(states)-1] != ConnClosed {
		t.Fatalf("states %v", states)
	}
}

// A client that stops reading gets GAP records; Publish never waits for it.
func TestWireSlowClientGetsGaps(t *testing.T) {
	// (the write timeout outlasts publishing 2M entries in a race build)
	srv, conn, _ := serveAndDial(t, ServerOptions{QueueEntries: 1000, Heartbeat: time.Hour, SocketBuffer: -1, WriteTimeout: time.Minute})
	fr := &frameReader{r: conn}
	for _, want := range []byte{frameHello, frameSnapshot} {
		if typ, _, err := fr.next(); err != nil || typ != want {
			t.Fatalf("frame %d %v, want %d", typ, err, want)
		}
	}
	poll.Until(t, "registered", func() bool { return srv.Stats().Clients == 1 })
	// The client reads nothing now. Publishing far more than the queue and
	// the socket buffers hold must finish (a blocked Publish would hang).
	const n = 2_000_000
	ents := testEntries(100, 2)
	finished := make(chan struct{})
	go func() {
		for i := 0; i < n; i += len(ents) {
			srv.Publish(0, ents)
		}
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("Publish blocked on a slow client")
	}
	if srv.Stats().Dropped == 0 {
		t.Fatal("nothing dropped for a client that never reads")
	}
	// Now read everything: entries + missed must account for every entry,
	// with sequence numbers that never go back.
	srv.Publish(0, ents[:1]) // flushes the pending gap
	var got, missed, next uint64
	for got+missed < n+1 {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		typ, p, err := fr.next()
		if err != nil {
			t.Fatalf("after %d entries, %d missed: %v", got, missed, err)
		}
		switch typ {
		case frameEntries:
			_, first, es, err := decodeEntries(p, nil)
			if err != nil || first != next {
				t.Fatalf("entries first %d, want %d (%v)", first, next, err)
			}
			got += uint64(len(es))
			next = first + uint64(len(es))
		case frameGap:
			_, m, nx, err := decodeGap(p)
			if err != nil || nx != next+m {
				t.Fatalf("gap %d next %d after %d (%v)", m, nx, next, err)
			}
			missed += m
			next = nx
		}
	}
	if missed == 0 || got+missed != n+1 {
		t.Fatalf("got %d + missed %d, want %d", got, missed, n+1)
	}
}

// fakeProducer serves one connection with the bytes write produces.
func fakeProducer(t *testing.T, write func(c net.Conn)) string {
	path := wiretest.ShortSock(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			write(c)
			c.Close()
		}
	}()
	return path
}

func validPrefix() []byte {
	e := &enc{texts: testTexts}
	encodeHello(e, &Hello{Version: ProtocolVersion, PID: 42, Host: "h"})
	encodeSnapshot(e, initialSnapshot().Segments, map[int]uint64{0: 0})
	return e.b
}

// A producer dying mid-frame leaves the client cleanly disconnected.
func TestWireProducerKilledMidFrame(t *testing.T) {
	e := &enc{texts: testTexts}
	encodeEntries(e, 0, 0, testEntries(50, 3))
	frame := e.b
	path := fakeProducer(t, func(c net.Conn) {
		c.Write(validPrefix())
		c.Write(frame[:len(frame)/2])
	})
	st := store.New(store.Options{})
	var last ClientStatus
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true, OnStatus: func(s ClientStatus) {
		if s.State == ConnDisconnected {
			last = s
		}
	}})
	err := cl.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "inside a frame") {
		t.Fatalf("Run = %v", err)
	}
	if last.State != ConnDisconnected || last.Err == nil || cl.Status().State != ConnClosed {
		t.Fatalf("status %+v", last)
	}
	if st.Len(0) != 0 || len(st.StateAt(0, 0).Segments) != 2 {
		t.Fatal("store should hold the snapshot and no entries")
	}
}

// Garbage into the client: rejected with a clear error, no panic.
func TestWireGarbageIntoClient(t *testing.T) {
	cases := map[string][]byte{
		"random":   []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"huge":     {0xff, 0xff, 0xff, 0x7f, 1},
		"magic":    {10, 0, 0, 0, frameHello, 'N', 'O', 'P', 'E', '!', '!', 1, 0, 0},
		"version":  append([]byte{9, 0, 0, 0, frameHello}, append([]byte(protocolMagic), 99, 0)...),
		"trailing": append(validPrefix(), 3, 0, 0, 0, frameGap, 0, 0),
		"bad-entry": func() []byte {
			b := validPrefix()
			return append(b, 6, 0, 0, 0, frameEntries, 0, 0, 1, 200, 0)
		}(),
		"entries-first": func() []byte {
			e := &enc{texts: testTexts}
			encodeHello(e, &Hello{Version: ProtocolVersion})
			encodeEntries(e, 0, 0, testEntries(2, 1))
			return e.b
		}(),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			path := fakeProducer(t, func(c net.Conn) { c.Write(b) })
			cl := NewClient("unix", path, store.New(store.Options{}), ClientOptions{NoReconnect: true})
			err := cl.Run(context.Background())
			if err == nil {
				t.Fatal("garbage accepted")
			}
			t.Logf("%s: %v", name, err)
		})
	}
}

// Garbage into the server: that connection is dropped, others continue.
func TestWireGarbageIntoServer(t *testing.T) {
	srv, bad, path := serveAndDial(t, ServerOptions{})
	bad.Write([]byte("\x00\x00\x00\x10garbage garbage garbage"))
	bad.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1<<16)
	for {
		if _, err := bad.Read(buf); err != nil {
			break // the server closed it
		}
	}
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	poll.Until(t, "good client connected", func() bool { return cl.Status().State == ConnConnected })
	poll.Until(t, "bad client gone", func() bool { return srv.Stats().Clients == 1 })
	srv.Publish(1, testEntries(10, 4))
	poll.Until(t, "entries", func() bool { return st.Len(1) == 10 })
}

// The client reconnects with backoff, says so, and keeps its history.
func TestWireReconnect(t *testing.T) {
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	var mu sync.Mutex
	seen := map[ConnState]int{}
	cl := NewClient("unix", path, st, ClientOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		OnStatus: func(s ClientStatus) { mu.Lock(); seen[s.State]++; mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	poll.Until(t, "connected", func() bool { return cl.Status().State == ConnConnected })
	srv.Publish(0, testEntries(100, 5))
	poll.Until(t, "first entries", func() bool { return st.Len(0) == 100 })
	srv.Close()
	poll.Until(t, "waiting to reconnect", func() bool { s := cl.Status(); return s.State == ConnDisconnected && s.Backoff > 0 })
	if err := cl.Status().Err; err == nil || !strings.Contains(err.Error(), "goodbye") {
		t.Fatalf("disconnect reason %v", err)
	}
	// a failed retry keeps the goodbye in view
	poll.Until(t, "a failed retry", func() bool { return cl.Status().Attempt >= 2 })
	if err := cl.Status().Err; err == nil || !strings.Contains(err.Error(), "goodbye") || !strings.Contains(err.Error(), "reconnecting: ") {
		t.Fatalf("after a failed retry the reason is %v", err)
	}
	srv2, err := Listen("unix", path, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	poll.Until(t, "reconnected", func() bool { return cl.Status().State == ConnConnected })
	if cl.Status().Attempt == 0 {
		t.Fatal("attempt count not reported")
	}
	srv2.Publish(0, testEntries(50, 6))
	poll.Until(t, "entries after reconnect", func() bool { return st.Len(0) == 150 })
	mu.Lock()
	defer mu.Unlock()
	if seen[ConnDisconnected] == 0 || seen[ConnReconnecting] == 0 || seen[ConnConnected] < 2 {
		t.Fatalf("states seen %v", seen)
	}
}

func TestListenTCPDefaultsToLoopback(t *testing.T) {
	srv, err := Listen("tcp", ":0", ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if a := srv.Addr().(*net.TCPAddr); !a.IP.IsLoopback() {
		t.Fatalf("listening on %v", a)
	}
	st := store.New(store.Options{})
	cl := NewClient("tcp", srv.Addr().String(), st, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	poll.Until(t, "connected", func() bool { return cl.Status().State == ConnConnected })
	srv.Publish(0, testEntries(10, 7))
	poll.Until(t, "entries", func() bool { return st.Len(0) == 10 })
}

func TestListenUnixMode(t *testing.T) {
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if m := fileMode(t, path); m != 0o600 {
		t.Fatalf("socket mode %o, want 600", m)
	}
	if _, err := Listen("unix", path, ServerOptions{}); err == nil {
		t.Fatal("a second producer took over a live socket")
	}
}

func FuzzWireDecode(f *testing.F) {
	f.Add(validPrefix())
	e := &enc{texts: testTexts}
	encodeEntries(e, 0, 0, testEntries(5, 1))
	encodeOps(e, []store.Op{{Name: "x"}})
	encodeHeartbeat(e, 1, []store.DeviceInfo{{ID: 1}})
	encodeGap(e, 0, 3, 9)
	encodeStacks(e, []snapshot.StackID{1}, testStacks[1:2])
	encodeBye(e, "bye")
	f.Add(append(validPrefix(), e.b...))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := &frameReader{r: strings.NewReader(string(b))}
		for i := 0; i < 100; i++ {
			typ, p, err := fr.next()
			if err != nil {
				return
			}
			switch typ {
			case frameHello:
				decodeHello(p)
			case frameStacks:
				decodeStacks(p, 1024)
			case frameSnapshot:
				decodeSnapshot(p)
			case frameEntries:
				decodeEntries(p, nil)
			case frameOps:
				decodeOps(p)
			case frameHeartbeat:
				decodeHeartbeat(p)
			case frameGap:
				decodeGap(p)
			case frameBye:
				decodeBye(p)
			}
		}
	})
}

// BenchmarkWireUnixSocket measures entries/s from Publish to the Store
// through a real Unix socket.
func BenchmarkWireUnixSocket(b *testing.B) {
	path := wiretest.ShortSock(b)
	srv, err := Listen("unix", path, ServerOptions{QueueEntries: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	for cl.Status().State != ConnConnected {
		time.Sleep(time.Millisecond)
	}
	ents := testEntries(256, 9)
	b.ResetTimer()
	c0 := benchcpu.Now()
	sent := 0
	for sent < b.N {
		n := min(len(ents), b.N-sent)
		srv.Publish(0, ents[:n])
		sent += n
		for int(st.Len(0))+int(srv.Stats().Dropped) < sent-(1<<18) { // stay within the queue
			time.Sleep(50 * time.Microsecond)
		}
	}
	for int(st.Len(0))+int(srv.Stats().Dropped) < b.N {
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	if d := srv.Stats().Dropped; d != 0 {
		b.Fatalf("%d dropped", d)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	benchcpu.Report(b, c0, float64(b.N), "entries/cpu-s")
}

// The example in docs/protocol.md is exactly what the encoder writes.
func TestWireDocExample(t *testing.T) {
	e := &enc{texts: testTexts}
	encodeHello(e, &Hello{Version: ProtocolVersion, PID: 4242, Host: "n1", ClockSource: "realtime"})
	encodeSnapshot(e, nil, nil)
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "## Example")
	j := strings.Index(s[i:], "```\n") + i + 4
	k := strings.Index(s[j:], "```") + j
	var want []byte
	for _, f := range strings.Fields(s[j:k]) {
		var b byte
		if _, err := fmt.Sscanf(f, "%02x", &b); err != nil {
			t.Fatalf("doc byte %q: %v", f, err)
		}
		want = append(want, b)
	}
	if !bytes.Equal(e.b, want) {
		t.Fatalf("encoder writes\n% x\ndoc says\n% x", e.b, want)
	}
	h, err := decodeHello(want[5:32])
	if err != nil || h.PID != 4242 || h.Host != "n1" {
		t.Fatalf("decoded %+v, %v", h, err)
	}
}

// Several clients at once, one leaving mid-stream and one joining late:
// each that stays gets every entry published while it was there.
func TestWireSeveralClients(t *testing.T) {
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, ServerOptions{QueueEntries: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	type cl struct {
		st     *store.Store
		c      *Client
		cancel context.CancelFunc
	}
	start := func() cl {
		st := store.New(store.Options{})
		c := NewClient("unix", path, st, ClientOptions{})
		ctx, cancel := context.WithCancel(context.Background())
		go c.Run(ctx)
		poll.Until(t, "connected", func() bool { return c.Status().State == ConnConnected })
		return cl{st, c, cancel}
	}
	a, b, leaver := start(), start(), start()
	defer a.cancel()
	defer b.cancel()
	ents := testEntries(30000, 8)
	srv.Publish(0, ents[:10000])
	poll.Until(t, "leaver has the first part", func() bool { return leaver.st.Len(0) == 10000 })
	leaver.cancel()
	poll.Until(t, "leaver gone", func() bool { return srv.Stats().Clients == 2 })
	srv.Publish(0, ents[10000:20000])
	late := start()
	defer late.cancel()
	srv.Publish(0, ents[20000:])
	for name, c := range map[string]cl{"a": a, "b": b} {
		poll.Until(t, name+" complete", func() bool { return c.st.Len(0) == 30000 })
		if g := c.st.Gaps(0); len(g) != 0 {
			t.Fatalf("%s: gaps %v", name, g)
		}
	}
	// the late client starts at its snapshot: only what came after it
	poll.Until(t, "late client", func() bool { return late.st.Len(0) == 10000 })
	want := ents[20000]
	want.Frames = 0 // no Stack resolver: ids arrive without frames and resolve to none
	if ev := late.st.Events(0, -1<<62, 1<<62, 1); ev[0].TraceEntry != want {
		t.Fatalf("late client starts with %+v, want %+v", ev[0].TraceEntry, want)
	}
	if leaver.st.Len(0) != 10000 {
		t.Fatalf("the client that left has %d entries", leaver.st.Len(0))
	}
}

// The additions a polling producer (monitor/producer/python) uses: a HELLO
// whose entry times are poll times with their resolution, entries carrying
// the rounded block size, and a GAP of unknown size.
func TestWirePollingProducer(t *testing.T) {
	seg := snapshot.Segment{Device: 0, Address: 1 << 20, TotalSize: 2 << 20, IsLarge: true,
		Blocks: []snapshot.Block{{Address: 1 << 20, Size: 2 << 20}}}
	ents := []snapshot.TraceEntry{
		{Action: snapshot.ActionAlloc, Addr: 1 << 20, Size: 1000, TimeUS: 5},
		{Action: snapshot.ActionAlloc, Addr: 1<<20 + 1024, Size: 3000, TimeUS: 5},
	}
	path := fakeProducer(t, func(c net.Conn) {
		e := &enc{texts: testTexts}
		encodeHello(e, &Hello{Version: ProtocolVersion, PID: 7, Host: "h", TimeBase: store.TimePollUS, Resolution: 250 * time.Millisecond})
		encodeSnapshot(e, []snapshot.Segment{seg}, map[int]uint64{0: 0})
		encodeEntriesSized(e, 0, 0, ents, []int64{1024}) // the second block's size is not known
		encodeGap(e, 0, 0, 2)
		encodeEntries(e, 0, 2, []snapshot.TraceEntry{{Action: snapshot.ActionSnapshot, Size: 4000, TimeUS: 9}})
		encodeBye(e, "done")
		c.Write(e.b)
	})
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true})
	if err := cl.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "goodbye") {
		t.Fatalf("Run = %v", err)
	}
	s := cl.Status()
	if s.Hello == nil || s.Hello.TimeBase != store.TimePollUS || s.Hello.Resolution != 250*time.Millisecond ||
		s.Hello.ClockSource != "poll:250ms" || s.Gaps != 1 || s.Missed != 0 || s.Entries != 3 {
		t.Fatalf("status %+v hello %+v", s, s.Hello)
	}
	if g := st.Gaps(0); len(g) != 1 || g[0].Missed != 0 || g[0].At != 2 {
		t.Fatalf("gaps %+v", g)
	}
	// the first block is 1024 bytes, the second as requested (3000)
	sum := st.Summary(0, 1<<62)
	if sum.ActiveBytes != 4000 || sum.TotalFreeBytes != 2<<20-1024-3000 || sum.LiveBlocks != 2 || sum.Blocks != 3 {
		t.Fatalf("summary %+v", sum)
	}
}

// Broken additions are decode errors naming the field.
func TestWirePollingProducerErrors(t *testing.T) {
	entry := func(flags byte, extra ...byte) []byte {
		e := &enc{texts: testTexts}
		off := e.frame(frameEntries)
		e.iv(0)
		e.uv(0)
		e.uv(1)
		e.u8(0)     // alloc
		e.uv(4096)  // addr
		e.iv(100)   // size
		e.uv(0)     // stream
		e.iv(0)     // time
		e.uv(0)     // frames
		e.u8(flags) // flags
		e.b = append(e.b, extra...)
		e.end(off)
		return e.b[5:]
	}
	for name, c := range map[string]struct {
		p    []byte
		want string
	}{
		"zero block size":  {entry(16, 0), "entry.block_size"},
		"negative":         {entry(16, 1), "entry.block_size"},
		"unknown flag bit": {entry(32), "entry.flags"},
	} {
		if _, _, _, _, err := decodeEntriesSized(c.p, nil, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	e := &enc{texts: testTexts}
	encodeHello(e, &Hello{Version: ProtocolVersion, TimeBase: store.TimePollUS, ClockSource: "realtime"})
	if _, err := decodeHello(e.b[5:]); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Errorf("poll time base without a resolution: %v", err)
	}
}

// A server without Snapshot sends a client every entry published after it
// connected, those published while its HELLO was being prepared too.
func TestWireNoSnapshotKeepsEarlyEntries(t *testing.T) {
	registered, published := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv, conn, _ := serveAndDial(t, ServerOptions{Heartbeat: time.Hour, Peaks: func() []DevicePeak {
		once.Do(func() { close(registered); <-published })
		return nil
	}})
	<-registered
	ents := testEntries(3, 1)
	srv.Publish(0, ents)
	close(published)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr := &frameReader{r: conn}
	for _, want := range []byte{frameHello, frameSnapshot, frameEntries} {
		typ, p, err := fr.next()
		if err != nil || typ != want {
			t.Fatalf("frame %d %v, want %d", typ, err, want)
		}
		if typ == frameEntries {
			if _, first, got, err := decodeEntries(p, nil); err != nil || first != 0 || len(got) != 3 {
				t.Fatalf("entries from %d: %d (%v), want the 3 published from 0", first, len(got), err)
			}
		}
	}
}

// The fast ENTRIES decoder agrees with the careful one on every frame it
// takes, and leaves the others (strings, actions by name, damage) to it.
func TestDecodeEntriesFastAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	plain := liveEntries(5000)
	for i := range plain {
		e := &plain[i]
		switch r.IntN(20) {
		case 0:
			e.HasPoolID, e.PoolID = true, snapshot.PoolID{r.Int64N(9) - 4, r.Int64N(1 << 40)}
		case 1:
			e.Action, e.Addr, e.DeviceFree = snapshot.ActionOOM, 0, r.Int64N(1<<34)
		case 2:
			e.TimeUS -= r.Int64N(1 << 20) // times may go back on the wire
		}
	}
	sizes := make([]int64, len(plain))
	for i := range sizes {
		if i%3 == 0 {
			sizes[i] = 1 << (9 + r.IntN(20))
		}
	}
	for _, c := range []struct {
		name  string
		ents  []snapshot.TraceEntry
		sizes []int64
		fast  bool
	}{
		{"plain", plain, sizes, true},
		{"unsized", plain[:100], nil, true},
		{"strings and named actions", testEntries(300, 3), nil, false},
	} {
		e := &enc{texts: testTexts}
		encodeEntriesSized(e, 3, 12345, c.ents, c.sizes)
		p := e.b[5:]
		dev, first, got, gotSizes, ok := decodeEntriesFast(p, nil, nil)
		if ok != c.fast {
			t.Fatalf("%s: fast decoder took it: %v, want %v", c.name, ok, c.fast)
		}
		wdev, wfirst, want, wantSizes, err := decodeEntriesCareful(p, nil, nil, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ok && (dev != wdev || first != wfirst || !slices.Equal(got, want) || !slices.Equal(gotSizes, wantSizes)) {
			t.Fatalf("%s: the decoders disagree", c.name)
		}
		// every cut and every damaged byte: the same result either way
		for cut := 0; cut < len(p); cut += 1 + cut/8 {
			for _, q := range [][]byte{p[:cut], damaged(p, cut)} {
				_, _, a, _, errA := decodeEntriesSized(q, nil, nil)
				_, _, b, _, errB := decodeEntriesCareful(q, nil, nil, nil, nil)
				if fmt.Sprint(errA) != fmt.Sprint(errB) || errA == nil && !slices.Equal(a, b) {
					t.Fatalf("%s, cut at %d: %v / %v", c.name, cut, errA, errB)
				}
			}
		}
	}
}

func damaged(p []byte, at int) []byte {
	q := slices.Clone(p)
	q[at] ^= 0xA5
	return q
}

// BenchmarkDecodeEntries: one ENTRIES frame of 4,096 entries of the live
// benchmark's pattern, by the decoder attach uses and by the careful one
// alone (cpu-ns per entry).
func BenchmarkDecodeEntries(b *testing.B) {
	e := &enc{texts: testTexts}
	encodeEntries(e, 0, 0, liveEntries(4096))
	p := e.b[5:]
	for _, c := range []struct {
		name string
		dec  func([]byte, []snapshot.TraceEntry, []int64) (int, uint64, []snapshot.TraceEntry, []int64, error)
	}{{"attach", decodeEntriesSized}, {"careful", func(p []byte, out []snapshot.TraceEntry, sizes []int64) (int, uint64, []snapshot.TraceEntry, []int64, error) {
		return decodeEntriesCareful(p, out, sizes, nil, nil)
	}}} {
		b.Run(c.name, func(b *testing.B) {
			var out []snapshot.TraceEntry
			var sizes []int64
			c0 := benchcpu.Now()
			for b.Loop() {
				var err error
				if _, _, out, sizes, err = c.dec(p, out[:0], sizes[:0]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((benchcpu.Now()-c0).Nanoseconds())/float64(b.N*4096), "cpu-ns/entry")
		})
	}
}

// TestEntryTextsCrossTheWire: an entry's strings, named by TextID in the
// producer's table, arrive as the same strings in the client's table (its
// own ids).
func TestEntryTextsCrossTheWire(t *testing.T) {
	ents := testEntries(20, 9)
	e := &enc{texts: testTexts}
	encodeEntries(e, 0, 0, ents)
	mine := snapshot.NewTextTable()
	mine.Intern("already here") // so the client's ids differ from the producer's
	_, _, got, _, err := decodeEntriesNamed(e.b[5:], nil, nil, nil, mine)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ents {
		for _, f := range [][2]snapshot.TextID{{ents[i].CompileContext, got[i].CompileContext}, {ents[i].UserMetadata, got[i].UserMetadata}} {
			if want, have := testTexts.Text(f[0]), mine.Text(f[1]); want != have {
				t.Errorf("entry %d: %q arrived as %q", i, want, have)
			}
		}
	}
	if mine.Text(got[7].CompileContext) != "N/A" || mine.Text(got[9].UserMetadata) != "meta" {
		t.Error("the test entries' strings did not arrive")
	}
}

// serveAndDial starts a Server with opts on a fresh socket and connects a
// raw connection to it; both close when the test ends.
func serveAndDial(t testing.TB, opts ServerOptions) (*Server, net.Conn, string) {
	t.Helper()
	path := wiretest.ShortSock(t)
	srv, err := Listen("unix", path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return srv, conn, path
}

// decodeEntries decodes an ENTRIES frame as attach does, without tables
// (unknown actions are ActionOther, strings dropped), appending to out.
func decodeEntries(p []byte, out []snapshot.TraceEntry) (device int, first uint64, _ []snapshot.TraceEntry, _ error) {
	device, first, out, _, err := decodeEntriesSized(p, out, nil)
	return device, first, out, err
}

// decodeEntriesSized is decodeEntries that also appends the block sizes.
func decodeEntriesSized(p []byte, out []snapshot.TraceEntry, sizes []int64) (device int, first uint64, _ []snapshot.TraceEntry, _ []int64, _ error) {
	return decodeEntriesNamed(p, out, sizes, nil, nil)
}
