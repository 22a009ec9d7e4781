package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/store"
)

// history is everything a view can ask about the first n positions of
// device 0, as JSON: summaries and segment maps at every position and the
// entries themselves.
func history(t *testing.T, st *store.Store, n int64) []byte {
	t.Helper()
	var out []any
	for p := int64(0); p <= n; p++ {
		sum := st.SummaryAtSeq(0, p)
		sum.Entries, sum.LastTime = 0, 0 // these grow with the log
		out = append(out, sum, st.StateAtSeq(0, p))
	}
	out = append(out, st.EventsAroundSeq(0, 0, 0, int(n)))
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClientProducerRestart: the producer behind a socket is replaced by
// another process (another pid) with another state. What the client
// received before stays byte for byte; a restart marker entry stands
// between the two processes' entries, on the timeline (Next) and in the
// event list, and the new process's entries continue from its snapshot.
func TestClientProducerRestart(t *testing.T) {
	path := wiretest.ShortSock(t)
	devs := []store.DeviceInfo{{ID: 0, Name: "Ascend910B-sim", HBMTotal: 64 << 30}}
	srv, err := Listen("unix", path, ServerOptions{
		Hello:    Hello{PID: 1111, Host: "node1", StartUS: 1_750_000_000_000_000, Devices: devs},
		Snapshot: func() (*snapshot.Snapshot, map[int]uint64) { return initialSnapshot(), nil },
		Stack:    stackOf,
	})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{CheckpointEvery: 16})
	cl := NewClient("unix", path, st, ClientOptions{MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	poll.Until(t, "connected", func() bool { return cl.Status().State == ConnConnected })
	srv.Publish(0, testEntries(120, 5))
	poll.Until(t, "first entries", func() bool { return st.Len(0) == 120 })
	before := history(t, st, 120)
	last := st.SummaryAtSeq(0, 120)

	srv.Close()
	poll.Until(t, "reconnecting", func() bool { return cl.Status().State == ConnReconnecting })
	// the new process: another pid, another state (one 8 MiB segment, 1 MiB in use)
	seg := snapshot.Segment{Device: 0, Address: 0x20000000, TotalSize: 8 << 20, Stream: 3, IsLarge: true, Blocks: []snapshot.Block{
		{Address: 0x20000000, Size: 1 << 20, RequestedSize: 1 << 20, State: snapshot.StateActiveAllocated},
		{Address: 0x20100000, Size: 7 << 20}}}
	srv2, err := Listen("unix", path, ServerOptions{
		Hello: Hello{PID: 2222, Host: "node1", StartUS: 1_750_000_000_500_000, Devices: devs},
		Snapshot: func() (*snapshot.Snapshot, map[int]uint64) {
			return &snapshot.Snapshot{Segments: []snapshot.Segment{seg}}, nil
		},
		Stack: stackOf,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	poll.Until(t, "the new process", func() bool { h := cl.Status().Hello; return h != nil && h.PID == 2222 })
	poll.Until(t, "the restart marker", func() bool { return st.Len(0) == 121 })
	srv2.Publish(0, []snapshot.TraceEntry{{Action: snapshot.ActionAlloc, Addr: 0x20100000, Size: 4096, Stream: 3, TimeUS: time.Now().UnixMicro()}})
	poll.Until(t, "the new process's entry", func() bool { return st.Len(0) == 122 })

	if after := history(t, st, 120); !bytes.Equal(after, before) {
		t.Fatalf("the restart rewrote history received before it:\n before %.400s\n after  %.400s", before, after)
	}
	ev := st.EventsAroundSeq(0, 121, 1, 1)
	if len(ev) != 2 || ev[0].Seq != 120 || ev[0].Action != store.ActionRestart || ev[0].Addr != 2222 {
		t.Fatalf("restart marker: %+v", ev)
	}
	if at, ok := st.Next(0, -1<<62, store.ActionRestart); !ok || at != ev[0].Time {
		t.Fatalf("the timeline does not find the marker: %d %v", at, ok)
	}
	// at the marker: the new process's state; after it, its entries on top
	if s := st.SummaryAtSeq(0, 121); s.ActiveBytes != 1<<20 || s.ReservedBytes != 8<<20 || s.Segments != 1 {
		t.Fatalf("at the marker: %+v", s)
	}
	if s := st.SummaryAtSeq(0, 122); s.ActiveBytes != 1<<20+4096 || s.PeakReservedBytes != max(last.PeakReservedBytes, 8<<20) {
		t.Fatalf("after the marker: %+v", s)
	}
	if g := st.Gaps(0); len(g) != 0 {
		t.Fatalf("a restart is not a gap: %+v", g)
	}
}

// A producer restarted on the same socket path while the old one is still
// closing (its clients get a grace to take their BYE) keeps its socket:
// the old one gives up the path when it stops listening, never later.
func TestCloseLeavesSuccessorSocket(t *testing.T) {
	path := wiretest.ShortSock(t)
	opts := ServerOptions{Heartbeat: time.Hour, Logf: func(string, ...any) {}, SocketBuffer: -1}
	old, err := Listen("unix", path, opts)
	if err != nil {
		t.Fatal(err)
	}
	// a client that reads nothing, its socket full: Close waits out the grace
	stuckClients(t, path, 1)
	poll.Until(t, "the client", func() bool { return old.Stats().Clients == 1 })
	ents := testEntries(1000, 7)
	for range 200 {
		old.Publish(0, ents)
	}
	closed := make(chan struct{})
	go func() { old.Close(); close(closed) }()
	poll.Until(t, "the old producer to leave the path", func() bool {
		_, err := os.Lstat(path)
		return errors.Is(err, os.ErrNotExist)
	})
	succ, err := Listen("unix", path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Close()
	<-closed
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the successor's socket after the old producer closed: %v", err)
	}
	c.Close()
}
