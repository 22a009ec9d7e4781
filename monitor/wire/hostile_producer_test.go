package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// Hostile producers: whatever a producer sends, a client holds bounded
// memory, reports one clear error and stays cancellable.

// runClient runs a client against path until it stops (or 30 s, a hang).
func runClient(t *testing.T, path string, opts ClientOptions) (*store.Store, *Client, error) {
	t.Helper()
	st := store.New(store.Options{})
	opts.NoReconnect = true
	cl := NewClient("unix", path, st, opts)
	done := make(chan error, 1)
	go func() { done <- cl.Run(context.Background()) }()
	select {
	case err := <-done:
		return st, cl, err
	case <-time.After(30 * time.Second):
		t.Fatal("client did not stop within 30 s")
	}
	return nil, nil, nil
}

// heapGrowth runs f and returns how many bytes it allocated.
func heapGrowth(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// A 16 MiB HELLO listing 2.2 million devices is refused from its count,
// allocating little (it once cost 2.7 GB and made attach unkillable).
func TestHostileHugeHello(t *testing.T) {
	e := &enc{texts: testTexts}
	off := e.frame(frameHello)
	e.b = append(e.b, protocolMagic...)
	e.b = binary.LittleEndian.AppendUint16(e.b, ProtocolVersion)
	e.uv(1)
	e.str("h")
	e.iv(0)
	e.iv(0)
	e.str("realtime")
	e.u8(0)
	const n = 2_200_000
	e.uv(n)
	for i := range n {
		e.iv(int64(i))
		e.str("")
		e.iv(0)
		e.iv(0)
		e.uv(1)
	}
	e.u8(0)
	e.end(off)
	if len(e.b) > MaxFrame {
		t.Fatalf("HELLO of %d bytes is over MaxFrame", len(e.b))
	}
	frame := e.b
	path := fakeProducer(t, func(c net.Conn) { c.Write(frame); time.Sleep(time.Second) })
	var err error
	grew := heapGrowth(func() { _, _, err = runClient(t, path, ClientOptions{}) })
	if err == nil || !strings.Contains(err.Error(), "devices") {
		t.Fatalf("Run = %v, want a devices error", err)
	}
	if grew > 64<<20 {
		t.Fatalf("client allocated %d MiB for one HELLO", grew>>20)
	}
	t.Logf("%d-byte HELLO refused: %v (allocated %d MiB)", len(frame), err, grew>>20)
}

// Past its entry limit a client stops, with the entries it had, and does
// not reconnect.
func TestHostileEntryFlood(t *testing.T) {
	e := &enc{texts: testTexts}
	for i := range 40 {
		encodeEntries(e, 0, uint64(i*1000), testEntries(1000, uint64(i)))
	}
	flood := e.b
	path := fakeProducer(t, func(c net.Conn) { c.Write(validPrefix()); c.Write(flood); time.Sleep(time.Second) })
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{Limits: ClientLimits{Entries: 10_000}})
	done := make(chan error, 1)
	go func() { done <- cl.Run(context.Background()) }() // reconnects allowed: a limit must still stop it
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("client kept going past its limit")
	}
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "10000 entries") {
		t.Fatalf("Run = %v, want a LimitError", err)
	}
	if st.Len(0) != 10_000 || cl.Status().State != ConnClosed {
		t.Fatalf("store holds %d entries, state %v", st.Len(0), cl.Status().State)
	}
}

// Device ids out of range, too many devices or streams, stacks too deep:
// each ends the session with an error naming it.
func TestHostileLimits(t *testing.T) {
	frames := func(build func(e *enc)) []byte {
		e := &enc{texts: testTexts}
		build(e)
		return append(validPrefix(), e.b...)
	}
	entriesOn := func(dev int, streams int) func(e *enc) {
		return func(e *enc) {
			ents := testEntries(streams, 1)
			for i := range ents {
				ents[i].Stream = uint64(i)
				ents[i].CompileContext, ents[i].UserMetadata = snapshot.NoText, snapshot.NoText
			}
			encodeEntries(e, dev, 0, ents)
		}
	}
	deep := make(snapshot.Stack, 2000)
	for i := range deep {
		deep[i] = snapshot.Frame{Filename: "f.py", Line: int64(i), Name: "g"}
	}
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"device id": {frames(entriesOn(1<<40, 1)), "device id"},
		"negative":  {frames(entriesOn(-1, 1)), "device id"},
		"devices": {frames(func(e *enc) {
			encodeHeartbeat(e, 0, make([]store.DeviceInfo, 0))
			hb := make([]store.DeviceInfo, 100)
			for i := range hb {
				hb[i].ID = i
			}
			encodeHeartbeat(e, 0, hb)
		}), "more than 64 devices"},
		"streams": {frames(entriesOn(0, 2000)), "more than 1024 streams"},
		"strings": {frames(func(e *enc) {
			e.texts = snapshot.NewTextTable()
			for f := range 40 {
				ents := testEntries(2000, 1)
				for i := range ents {
					ents[i].Stream = 0
					ents[i].UserMetadata = e.texts.Intern(fmt.Sprint("step ", f*2000+i))
				}
				encodeEntries(e, 0, uint64(f*2000), ents)
			}
		}), "more than 65536 distinct compile_context/user_metadata values"},
		"deep stack": {frames(func(e *enc) { encodeStacks(e, []snapshot.StackID{1}, []snapshot.Stack{deep}) }), "over the limit of 1024"},
		"ops":        {frames(func(e *enc) { encodeOps(e, make([]store.Op, maxFrameOps+1)) }), "over the limit"},
	} {
		path := fakeProducer(t, func(conn net.Conn) { conn.Write(c.data); time.Sleep(time.Second) })
		_, _, err := runClient(t, path, ClientOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Run = %v, want %q", name, err, c.want)
		}
	}
}

// A producer that stops sending in the middle of a frame has stalled: it
// did not close the connection, and the error says so (not "closed").
func TestHostileStallIsNotAClose(t *testing.T) {
	e := &enc{texts: testTexts}
	encodeEntries(e, 0, 0, testEntries(50, 3))
	half := e.b[:len(e.b)/2]
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"mid-frame", append(validPrefix(), half...), "stalled"},
		{"between frames", validPrefix(), "silent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// the connection stays open until the test is over: the client
			// must find the stall however long it takes to notice
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			path := fakeProducer(t, func(c net.Conn) { c.Write(tc.data); <-hold })
			_, _, err := runClient(t, path, ClientOptions{Silence: 300 * time.Millisecond})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "closed") {
				t.Errorf("%s: Run = %v, want %q and no \"closed\"", tc.name, err, tc.want)
			}
		})
	}
}

// 151k ops in one-op OPS frames, newest first: the client hands them to
// the Store in batches merged in linear time, not one re-sort per frame.
func TestHostileOpsReverseOrder(t *testing.T) {
	const n = 151_000
	e := &enc{texts: testTexts}
	for i := range n {
		t0 := int64(n-i) * 10
		encodeOps(e, []store.Op{{Name: "aten::add", StartUS: t0, EndUS: t0 + 5, Thread: 1}})
	}
	data := append(validPrefix(), e.b...)
	path := fakeProducer(t, func(c net.Conn) { c.Write(data) })
	start := time.Now()
	st, _, _ := runClient(t, path, ClientOptions{})
	ops := st.Ops(0, 1<<62)
	if len(ops) != n {
		t.Fatalf("store holds %d ops, want %d", len(ops), n)
	}
	for i := 1; i < len(ops); i++ {
		if ops[i].StartUS < ops[i-1].StartUS {
			t.Fatalf("ops out of order at %d", i)
		}
	}
	t.Logf("%d reverse-order OPS frames ingested in %v", n, time.Since(start))
}

// attach by pid checks who serves the socket (SO_PEERCRED).
func TestClientChecksPeer(t *testing.T) {
	path := fakeProducer(t, func(c net.Conn) { c.Write(validPrefix()); time.Sleep(200 * time.Millisecond) })
	// this process serves the socket: right pid passes
	st := store.New(store.Options{})
	cl := NewClient("unix", path, st, ClientOptions{NoReconnect: true, ExpectPID: runtimeGetpid()})
	cl.Run(context.Background())
	if cl.Status().Hello == nil {
		t.Fatalf("the right peer was refused: %v", cl.Status().Err)
	}
	_, _, err := runClient(t, path, ClientOptions{ExpectPID: 1})
	var pe *PeerError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "served by pid") {
		t.Fatalf("wrong peer: Run = %v, want a PeerError", err)
	}
}

func runtimeGetpid() int { return os.Getpid() }
