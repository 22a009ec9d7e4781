package monitor

import (
	"context"
	"math/rand/v2"
	"net"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
)

func newAllocators(t testing.TB, n int) ([]*allocator.Allocator, *acl.Runtime) {
	t.Helper()
	specs := make([]acl.DeviceSpec, n)
	rt := acl.NewRuntime(acl.Config{Devices: specs})
	var out []*allocator.Allocator
	for i := 0; i < n; i++ {
		dev, err := rt.Device(i)
		if err != nil {
			t.Fatal(err)
		}
		a, err := allocator.New(dev, allocator.DefaultConfig(allocator.FlavourNPU))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out, rt
}

// churn allocates and frees on a, leaving some blocks live.
func churn(t testing.TB, a *allocator.Allocator, seed uint64, ops int) []uint64 {
	r := rand.New(rand.NewPCG(seed, 3))
	var live []uint64
	for i := 0; i < ops; i++ {
		if len(live) > 0 && r.IntN(3) == 0 {
			k := r.IntN(len(live))
			if err := a.FreeWithStack(live[k], []allocator.Frame{{Filename: "free.py", Line: int64(k % 5), Name: "f"}}); err != nil {
				t.Fatal(err)
			}
			live = append(live[:k], live[k+1:]...)
			continue
		}
		p, err := a.MallocWithStack(int64(512+r.IntN(8<<20)), 0, []allocator.Frame{{Filename: "train.py", Line: int64(i % 7), Name: "step"}})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, p)
	}
	return live
}

// liveBlocks lists (address, requested size, state) of live blocks.
func liveBlocks(segs []allocator.Segment) [][3]int64 {
	var out [][3]int64
	for _, s := range segs {
		for _, b := range s.Blocks {
			if b.State.Active() {
				out = append(out, [3]int64{int64(b.Address), b.RequestedSize, int64(b.State)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// The in-process source: work before and after attaching, on two devices;
// the Store ends in the allocators' own state, with their stacks.
func TestAttachAllocators(t *testing.T) {
	allocs, rt := newAllocators(t, 2)
	allocs[0].RecordHistory(true, allocator.RecordAll, 1<<20) // device 0 brings its history
	churn(t, allocs[0], 1, 200)
	churn(t, allocs[1], 2, 100)
	st := NewStore(StoreOptions{CheckpointEvery: 64})
	detach, err := AttachAllocators(st, allocs, SourceOptions{Devices: func() []DeviceInfo {
		var out []DeviceInfo
		for i := 0; i < 2; i++ {
			d, _ := rt.Device(i)
			in := d.Info()
			out = append(out, DeviceInfo{ID: in.ID, Name: in.Name, HBMTotal: in.HBMTotal, HBMUsed: in.HBMUsed, Streams: in.Streams})
		}
		return out
	}})
	if err != nil {
		t.Fatal(err)
	}
	before0 := st.Len(0)
	if before0 == 0 {
		t.Fatal("device 0's recorded history was not ingested")
	}
	churn(t, allocs[0], 3, 300)
	churn(t, allocs[1], 4, 300)
	detach() // waits until buffered entries are delivered
	for i, a := range allocs {
		snap := a.Snapshot()
		_, last := st.Bounds(i)
		got := st.StateAt(i, last)
		if !reflect.DeepEqual(liveBlocks(got.Segments), liveBlocks(snap.Segments)) {
			t.Fatalf("device %d: live blocks differ from the allocator's", i)
		}
		if len(st.Gaps(i)) != 0 {
			t.Fatalf("device %d: gaps %v", i, st.Gaps(i))
		}
		for _, e := range st.Events(i, -1<<62, 1<<62, 0) {
			// device 0 records context (stacks); device 1 does not
			if i == 0 && e.Action == allocator.ActionAlloc && len(st.Stack(e.Frames)) == 0 {
				t.Fatalf("device %d: alloc without its stack", i)
			}
		}
		if di, ok := st.DeviceInfo(i); !ok || di.HBMTotal == 0 {
			t.Fatalf("device %d info %+v", i, di)
		}
	}
	if st.Len(0) <= before0 {
		t.Fatal("no live entries appended")
	}
}

// Allocators served over the wire: a client that connects mid-run ends in
// the same state as the allocator (the snapshot cut is exact).
func TestServeAllocators(t *testing.T) {
	allocs, _ := newAllocators(t, 1)
	churn(t, allocs[0], 5, 150)
	path := shortSock(t)
	_, stop, err := ServeAllocators("unix", path, allocs, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	done := make(chan struct{})
	go func() { churn(t, allocs[0], 6, 2000); close(done) }() // traffic while the client joins
	st := NewStore(StoreOptions{})
	cl := NewClient("unix", path, st, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	waitFor(t, "connected", func() bool { return cl.Status().State == StateConnected })
	<-done
	churn(t, allocs[0], 7, 100)
	want := allocs[0].Snapshot() // its marker is the last entry
	waitFor(t, "caught up", func() bool {
		evs := st.EventsAround(0, 1<<62, 1, 0)
		return len(evs) == 1 && evs[0].Action == allocator.ActionSnapshot && evs[0].Size == totalActive(want)
	})
	got := st.StateAt(0, 1<<62)
	if !reflect.DeepEqual(liveBlocks(got.Segments), liveBlocks(want.Segments)) {
		t.Fatalf("client state differs from the allocator's:\n got %v\nwant %v", liveBlocks(got.Segments), liveBlocks(want.Segments))
	}
	if st.Summary(0, 1<<62).Dropped != 0 {
		t.Fatal("entries dropped")
	}
	// an inexact cut would replay entries the snapshot already holds (an
	// alloc of a live address) or lose some (a free of an unknown one)
	first, _ := st.Bounds(0)
	live := map[uint64]bool{}
	for _, b := range liveBlocks(st.StateAt(0, first-1).Segments) {
		live[uint64(b[0])] = true
	}
	for _, e := range st.Events(0, -1<<62, 1<<62, 0) {
		switch e.Action {
		case allocator.ActionAlloc:
			if live[e.Addr] {
				t.Fatalf("entry %d: alloc of live %#x (duplicated across the cut)", e.Seq, e.Addr)
			}
			live[e.Addr] = true
		case allocator.ActionFreeCompleted:
			if !live[e.Addr] {
				t.Fatalf("entry %d: free of unknown %#x (lost across the cut)", e.Seq, e.Addr)
			}
			delete(live, e.Addr)
		}
	}
}

// benchServeMallocFree runs Malloc/Free pairs on an allocator served over
// the wire, with stalled clients connected (they read the handshake, then
// nothing). ns/op is one pair (two, or three, trace entries published).
func benchServeMallocFree(b *testing.B, stalled int) {
	allocs, _ := newAllocators(b, 1)
	dir, _ := filepathTemp()
	defer removeAll(dir)
	path := dir + "/s.sock"
	srv, stop, err := ServeAllocators("unix", path, allocs, ServerOptions{QueueEntries: 4096, Logf: func(string, ...any) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for i := 0; i < stalled; i++ {
		c, err := net.Dial("unix", path)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		fr := &frameReader{r: c}
		fr.next() // HELLO; SNAPSHOT and everything after stay unread
	}
	for srv.Stats().Clients != stalled {
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

// BenchmarkServeMallocFreeNoClient is the baseline: served, nobody connected.
func BenchmarkServeMallocFreeNoClient(b *testing.B) { benchServeMallocFree(b, 0) }

// BenchmarkServeMallocFreeStalledClient: a client that stopped reading must
// not slow the allocator (its queue fills, entries are dropped for it).
func BenchmarkServeMallocFreeStalledClient(b *testing.B) { benchServeMallocFree(b, 1) }

// A client that falls behind gets GAPs, then a fresh snapshot that makes
// its state exact again.
func TestServeAllocatorsResyncAfterGap(t *testing.T) {
	// a small read-ahead and socket buffer: the stalled Store soon stops
	// the reading, and the producer's queue overflows
	defer func(b int64) { readAheadBytes = b }(readAheadBytes)
	readAheadBytes = 4096
	allocs, _ := newAllocators(t, 1)
	path := shortSock(t)
	srv, stop, err := ServeAllocators("unix", path, allocs, ServerOptions{QueueEntries: 64, ResyncInterval: 20 * time.Millisecond, Heartbeat: 10 * time.Millisecond, SocketBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	st := NewStore(StoreOptions{})
	cl := NewClient("unix", path, st, ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { cl.Run(ctx); close(done) }()
	// the client reads readAheadBytes until Run returns: stop it before
	// the deferred restore above writes the variable
	defer func() { cancel(); <-done }()
	waitFor(t, "connected", func() bool { return cl.Status().State == StateConnected })
	// stall the client: its Store refuses writes while the producer churns
	st.mu.Lock()
	live := churn(t, allocs[0], 9, 40000)
	waitFor(t, "drops", func() bool { return srv.Stats().Dropped > 0 })
	st.mu.Unlock()
	for _, p := range live[:len(live)/2] {
		allocs[0].Free(p)
	}
	want := liveBlocks(allocs[0].Snapshot().Segments)
	waitFor(t, "state repaired", func() bool {
		return reflect.DeepEqual(liveBlocks(st.StateAt(0, 1<<62).Segments), want)
	})
	s := cl.Status()
	if s.Missed == 0 || s.Resyncs == 0 || len(st.Gaps(0)) == 0 {
		t.Fatalf("status %+v, gaps %v", s, st.Gaps(0))
	}
}
