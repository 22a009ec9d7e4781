package attach

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
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
		a, err := allocator.New(dev, config.DefaultConfig(config.FlavourNPU))
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
			if err := a.FreeWithStack(live[k], []snapshot.Frame{{Filename: "free.py", Line: int64(k % 5), Name: "f"}}); err != nil {
				t.Fatal(err)
			}
			live = append(live[:k], live[k+1:]...)
			continue
		}
		p, err := a.MallocWithStack(int64(512+r.IntN(8<<20)), 0, []snapshot.Frame{{Filename: "train.py", Line: int64(i % 7), Name: "step"}})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, p)
	}
	return live
}

// liveBlocks lists (address, requested size, state) of live blocks.
func liveBlocks(segs []snapshot.Segment) [][3]int64 {
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
func TestStore(t *testing.T) {
	allocs, rt := newAllocators(t, 2)
	allocs[0].RecordHistory(true, allocator.RecordAll, 1<<20) // device 0 brings its history
	churn(t, allocs[0], 1, 200)
	churn(t, allocs[1], 2, 100)
	st := store.New(store.Options{CheckpointEvery: 64})
	detach, err := Store(st, allocs, Options{Devices: func() []store.DeviceInfo {
		var out []store.DeviceInfo
		for i := 0; i < 2; i++ {
			d, _ := rt.Device(i)
			in := d.Info()
			out = append(out, store.DeviceInfo{ID: in.ID, Name: in.Name, HBMTotal: in.HBMTotal, HBMUsed: in.HBMUsed, Streams: in.Streams})
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
			if i == 0 && e.Action == snapshot.ActionAlloc && len(st.Stack(e.Frames)) == 0 {
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
func TestServe(t *testing.T) {
	allocs, _ := newAllocators(t, 1)
	churn(t, allocs[0], 5, 150)
	path := wiretest.ShortSock(t)
	_, stop, err := Serve("unix", path, allocs, wire.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	done := make(chan struct{})
	go func() { churn(t, allocs[0], 6, 2000); close(done) }() // traffic while the client joins
	st := store.New(store.Options{})
	cl := wire.NewClient("unix", path, st, wire.ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	poll.Until(t, "connected", func() bool { return cl.Status().State == wire.ConnConnected })
	<-done
	churn(t, allocs[0], 7, 100)
	want := allocs[0].Snapshot() // its marker is the last entry
	poll.Until(t, "caught up", func() bool {
		evs := st.EventsAround(0, 1<<62, 1, 0)
		return len(evs) == 1 && evs[0].Action == snapshot.ActionSnapshot && evs[0].Size == totalActive(want)
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
		case snapshot.ActionAlloc:
			if live[e.Addr] {
				t.Fatalf("entry %d: alloc of live %#x (duplicated across the cut)", e.Seq, e.Addr)
			}
			live[e.Addr] = true
		case snapshot.ActionFreeCompleted:
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
	benchServe(b, stalled, wire.ServerOptions{QueueEntries: 4096}, func(c net.Conn) {
		c.Read(make([]byte, 64)) // the start of HELLO; the rest stays unread
	})
}

// BenchmarkServeMallocFreeNoClient is the baseline: served, nobody connected.
func BenchmarkServeMallocFreeNoClient(b *testing.B) { benchServeMallocFree(b, 0) }

// BenchmarkServeMallocFreeStalledClient: a client that stopped reading must
// not slow the allocator (its queue fills, entries are dropped for it).
func BenchmarkServeMallocFreeStalledClient(b *testing.B) { benchServeMallocFree(b, 1) }

// A client that falls behind gets GAPs, then a fresh snapshot that makes
// its state exact again.
func TestServeResyncAfterGap(t *testing.T) {
	allocs, _ := newAllocators(t, 1)
	path := wiretest.ShortSock(t)
	srv, stop, err := Serve("unix", path, allocs, wire.ServerOptions{QueueEntries: 64, ResyncInterval: 20 * time.Millisecond, Heartbeat: 10 * time.Millisecond, SocketBuffer: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// the client reads through a relay that can stop reading from the server
	relay, hold := stallRelay(t, path)
	st := store.New(store.Options{})
	cl := wire.NewClient("unix", relay, st, wire.ClientOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cl.Run(ctx)
	poll.Until(t, "connected", func() bool { return cl.Status().State == wire.ConnConnected })
	// stall the client while the producer churns
	hold.Lock()
	live := churn(t, allocs[0], 9, 40000)
	poll.Until(t, "drops", func() bool { return srv.Stats().Dropped > 0 })
	hold.Unlock()
	for _, p := range live[:len(live)/2] {
		allocs[0].Free(p)
	}
	want := liveBlocks(allocs[0].Snapshot().Segments)
	poll.Until(t, "state repaired", func() bool {
		return reflect.DeepEqual(liveBlocks(st.StateAt(0, 1<<62).Segments), want)
	})
	s := cl.Status()
	if s.Missed == 0 || s.Resyncs == 0 || len(st.Gaps(0)) == 0 {
		t.Fatalf("status %+v, gaps %v", s, st.Gaps(0))
	}
}

// stallRelay relays one Unix socket to another; while hold is locked it
// stops reading from the server, so the server's queue for the client
// fills as with a client that fell behind.
func stallRelay(t *testing.T, server string) (path string, hold *sync.Mutex) {
	t.Helper()
	path = wiretest.ShortSock(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	hold = &sync.Mutex{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", server)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(s, c); s.Close() }()
			go func() {
				buf := make([]byte, 4096)
				for {
					hold.Lock() // held by the test: this relay stops reading
					n, err := s.Read(buf)
					hold.Unlock()
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return path, hold
}
