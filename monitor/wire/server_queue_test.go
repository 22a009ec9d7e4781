package wire

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/internal/testutil/poll"
)

// readHandshake reads a client's HELLO, STACKS and first SNAPSHOT.
func readHandshake(t *testing.T, fr *frameReader) {
	t.Helper()
	for {
		typ, _, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		if typ == frameSnapshot {
			return
		}
	}
}

// readEntries reads frames until want entries arrived, checking that their
// sequence numbers follow on from next; it fails on a GAP. With defined
// (the stack ids the connection defined so far, added to) it checks that
// every stack id an entry names was defined before it.
func readEntries(t *testing.T, conn net.Conn, fr *frameReader, next uint64, want int, actions *snapshot.ActionTable, texts *snapshot.TextTable, defined map[snapshot.StackID]bool) []snapshot.TraceEntry {
	t.Helper()
	var got []snapshot.TraceEntry
	for len(got) < want {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		typ, p, err := fr.next()
		if err != nil {
			t.Fatalf("after %d entries: %v", len(got), err)
		}
		switch typ {
		case frameGap:
			_, missed, at, _ := decodeGap(p)
			t.Fatalf("GAP after %d entries: %d missed, next %d", len(got), missed, at)
		case frameStacks:
			ws, err := decodeStacks(p, 1024)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				if defined != nil {
					defined[snapshot.StackID(w.id)] = true
				}
			}
		case frameEntries:
			_, first, es, _, err := decodeEntriesNamed(p, nil, nil, actions, texts)
			if err != nil {
				t.Fatal(err)
			}
			if first != next {
				t.Fatalf("ENTRIES from %d, want %d", first, next)
			}
			for _, e := range es {
				if defined != nil && e.Frames > 0 && !defined[e.Frames] {
					t.Fatalf("entry %d names stack %d before a STACKS frame defined it", next, e.Frames)
				}
			}
			next += uint64(len(es))
			got = append(got, es...)
		}
	}
	return got
}

// A client that takes nothing for a while (a stall: here it reads nothing
// until everything is published) loses nothing while what was published
// meanwhile fits the producer's queue: the queue is bounded by the bytes of
// the encoded entries (≈ 13 each here), so 1 MiB holds 50,000 entries
// (a queue of TraceEntry copies, 80 bytes each, held 13,000).
func TestServerStalledClientLosesNothing(t *testing.T) {
	srv, conn, _ := serveAndDial(t, ServerOptions{QueueBytes: 1 << 20, SocketBuffer: 16 << 10,
		WriteTimeout: time.Minute, Heartbeat: time.Hour, Logf: func(string, ...any) {}})
	fr := &frameReader{r: conn}
	readHandshake(t, fr)
	poll.Until(t, "registered", func() bool { return srv.Stats().Clients == 1 })
	const n = 50_000
	ents := liveEntries(n)
	for i := 0; i < n; i += 1000 {
		srv.Publish(0, ents[i:i+1000])
	}
	if d := srv.Stats().Dropped; d != 0 {
		t.Fatalf("%d entries dropped for a client that stalled within the queue's bound", d)
	}
	got := readEntries(t, conn, fr, 0, n, nil, nil, nil)
	for i := range got {
		if got[i] != ents[i] {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], ents[i])
		}
	}
}

// A client that joins while the queue's newest record is being filled gets
// exactly the entries its snapshot does not reflect, from the middle of the
// record on, with every field (strings, actions by name, times) intact, and
// a STACKS frame for every stack they name, although another client was
// sent those stacks before it joined.
func TestServerJoinMidRecord(t *testing.T) {
	actions, texts := snapshot.NewActionTable(), snapshot.NewTextTable()
	ents := testEntriesIn(200, 5, actions, texts)
	var resume atomic.Uint64
	var hold atomic.Bool
	entered, proceed := make(chan struct{}), make(chan struct{})
	srv, first, path := serveAndDial(t, ServerOptions{Actions: actions, Texts: texts, Heartbeat: time.Hour,
		Stack: func(id snapshot.StackID) snapshot.Stack {
			return snapshot.Stack{{Filename: "train.py", Line: int64(id), Name: "step"}}
		},
		Snapshot: func() (*snapshot.Snapshot, map[int]uint64) {
			if hold.Load() { // the second client: registered, its state not taken yet
				entered <- struct{}{}
				<-proceed
			}
			return &snapshot.Snapshot{}, map[int]uint64{0: resume.Load()}
		}})
	fr1 := &frameReader{r: first}
	readHandshake(t, fr1)
	srv.Publish(0, ents[:60])
	defined1 := map[snapshot.StackID]bool{}
	readEntries(t, first, fr1, 0, 60, actions, texts, defined1) // stacks 1–3 are sent to the first client

	hold.Store(true)
	second, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	<-entered
	srv.Publish(0, ents[60:]) // one record, 60..199, queued for both
	resume.Store(100)         // the second client's state reflects 60..99
	close(proceed)
	fr2 := &frameReader{r: second}
	readHandshake(t, fr2)
	defined := map[snapshot.StackID]bool{}
	got := readEntries(t, second, fr2, 100, 100, actions, texts, defined)
	for i := range got {
		if got[i] != ents[100+i] {
			t.Fatalf("entry %d: %+v, want %+v", 100+i, got[i], ents[100+i])
		}
	}
	if len(defined) != 3 {
		t.Fatalf("stacks %v defined for the second client, want 1–3", defined)
	}
	if got := readEntries(t, first, fr1, 60, 140, actions, texts, defined1); got[139] != ents[199] {
		t.Fatal("the first client's entries differ")
	}
}

// testEntriesIn is testEntries with its strings and named actions in the
// given tables.
func testEntriesIn(n int, seed uint64, actions *snapshot.ActionTable, texts *snapshot.TextTable) []snapshot.TraceEntry {
	out := testEntries(n, seed)
	for i := range out {
		if i%10 == 5 {
			out[i].Action = actions.Parse("wire_test_custom")
		}
		if i%10 == 7 {
			out[i].CompileContext = texts.Intern("N/A")
		} else {
			out[i].CompileContext = snapshot.NoText
		}
		if i%10 == 9 {
			out[i].UserMetadata = texts.Intern("meta")
		} else {
			out[i].UserMetadata = snapshot.NoText
		}
	}
	return out
}

// Cutting the first k entries off an encoded body gives, byte for byte, the
// encoding of the rest from the frame's start, for every k.
func TestCutEntryBodies(t *testing.T) {
	actions, texts := snapshot.NewActionTable(), snapshot.NewTextTable()
	ents := testEntriesIn(40, 9, actions, texts)
	e := &enc{actions: actions, texts: texts}
	encodeEntryBodies(e, ents, nil, 0)
	body := e.b
	for k := 0; k <= len(ents); k++ {
		got, err := cutEntryBodies(body, k)
		if err != nil {
			t.Fatalf("k=%d: %v", k, err)
		}
		w := &enc{actions: actions, texts: texts}
		encodeEntryBodies(w, ents[k:], nil, 0)
		if !bytes.Equal(got, w.b) {
			t.Fatalf("k=%d: cut body differs from the rest encoded afresh", k)
		}
	}
	if _, err := cutEntryBodies(body[:len(body)-1], len(ents)); err == nil {
		t.Fatal("a truncated body was cut without an error")
	}
}

// BenchmarkServerPublish measures the producer's side of the live path per
// entry (cpu-ns/op: Publish, queueing, the client's writer and the socket
// writes; the reading end discards what it reads, in the same process) and
// what the shared queue holds per entry (queue-B/entry: its bytes over its
// entries, QueueBytes' unit), for the live benchmark's pattern published
// 1,024 entries at a time to one client.
func BenchmarkServerPublish(b *testing.B) {
	srv, conn, _ := serveAndDial(b, ServerOptions{Heartbeat: time.Hour, Logf: func(string, ...any) {}})
	var read atomic.Int64
	go func() {
		buf := make([]byte, 256<<10)
		for {
			n, err := conn.Read(buf)
			read.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	for srv.Stats().Clients == 0 {
		time.Sleep(time.Millisecond)
	}
	ents := liveEntries(1 << 16)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i += 1024 {
		k := min(1024, b.N-i)
		j := i % (len(ents) - 1024)
		srv.Publish(0, ents[j:j+k])
	}
	// everything written: the reader idle for 60 ms
	for last, still := int64(-1), 0; still < 3; {
		time.Sleep(20 * time.Millisecond)
		n := read.Load()
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	b.StopTimer()
	benchcpu.Report(b, c0, float64(b.N), "entries/cpu-s")
	// published faster than the reading end takes them, entries are dropped
	// (and then cost the writer nothing): compare runs without drops
	b.ReportMetric(float64(srv.Stats().Dropped)/float64(b.N), "dropped/op")
	srv.pubMu.Lock()
	b.ReportMetric(float64(srv.q.bytes)/float64(max(srv.q.held, 1)), "queue-B/entry")
	srv.pubMu.Unlock()
}
