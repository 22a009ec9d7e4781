package attach

import (
	"errors"
	"sync"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
)

// In-process sources: allocators of this process feeding a Store directly
// (npumon sim) or a wire Server (an instrumented process). Both attach an
// allocator trace tracker, which runs on its own goroutine behind a bounded
// buffer, so the allocator never waits for npumon; entries the tracker had
// to drop become gap records.
//
// The initial state is a.Snapshot(). The allocator records a `snapshot`
// entry (Size = total active bytes) under the same lock the snapshot is
// taken under, so that entry is the exact cut in the tracker's stream:
// entries up to it are in the snapshot, later ones are appended.

// Options tune Store.
type Options struct {
	// Devices reports device information (HBM used and total); it is read
	// at start and then every Interval. Nil: no device information.
	Devices func() []store.DeviceInfo
	// Interval between device information updates (default 500 ms).
	Interval time.Duration
	// Buffer is how many entries may wait for the Store per allocator
	// (default allocator.DefaultTrackerBuffer).
	Buffer int
}

// markerTimeout bounds the wait for the snapshot entry to come through the
// tracker; past it the cut is approximate.
const markerTimeout = 2 * time.Second

// cut waits for the snapshot entry of one snapshot.Snapshot call.
type cut struct {
	mu   sync.Mutex
	want int64       // total active bytes of the awaited snapshot; -1: none awaited
	ch   chan uint64 // receives the position right after the marker
}

// arm starts waiting for a marker; call before a.Snapshot.
func (c *cut) arm() chan uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want = -2 // any marker until the snapshot's total is known
	c.ch = make(chan uint64, 1)
	return c.ch
}

// expect narrows the wait to the marker carrying the snapshot's total.
func (c *cut) expect(total int64) {
	c.mu.Lock()
	if c.want == -2 {
		c.want = total
	}
	c.mu.Unlock()
}

// snapshot takes a's snapshot and waits for its entry to come through
// the tracker: pos is the position right after it; ok is false when the
// wait timed out (the cut is then approximate).
func (c *cut) snapshot(a *allocator.Allocator) (snap *snapshot.Snapshot, pos uint64, ok bool) {
	ch := c.arm()
	snap = a.Snapshot()
	c.expect(totalActive(snap))
	select {
	case pos = <-ch:
		return snap, pos, true
	case <-time.After(markerTimeout):
		return snap, 0, false
	}
}

// seen reports a snapshot entry at position pos (the position after it);
// true when it was the awaited one.
func (c *cut) seen(size int64, pos uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil || (c.want >= 0 && size != c.want) {
		return false
	}
	c.ch <- pos
	c.ch, c.want = nil, -1
	return true
}

func totalActive(s *snapshot.Snapshot) int64 {
	var n int64
	for i := range s.Segments {
		n += s.Segments[i].ActiveSize
	}
	return n
}

// Store feeds st from in-process allocators: each one's
// snapshot starts its device log (with its history, if recorded), then
// every traced entry is appended. detach stops the feed.
func Store(st *store.Store, allocs []*allocator.Allocator, opts Options) (detach func(), err error) {
	if len(allocs) == 0 {
		return nil, errors.New("monitor: attach: no allocators")
	}
	if opts.Interval <= 0 {
		opts.Interval = 500 * time.Millisecond
	}
	if opts.Buffer <= 0 {
		opts.Buffer = allocator.DefaultTrackerBuffer
	}
	var detaches []func()
	stop := make(chan struct{})
	ready := make(chan struct{})
	merged := &snapshot.Snapshot{}
	for _, a := range allocs {
		dev := a.Device()
		c := &cut{want: -1}
		synced := false
		var stackMap map[snapshot.StackID]snapshot.StackID
		fn := func(device int, es []snapshot.TraceEntry) {
			i := 0
			for ; !synced && i < len(es); i++ {
				// before the cut: already in the snapshot
				synced = es[i].Action == snapshot.ActionSnapshot && c.seen(es[i].Size, 0)
			}
			if es = es[i:]; len(es) == 0 {
				return
			}
			<-ready
			for j := range es {
				if e := &es[j]; e.Frames > 0 {
					id, ok := stackMap[e.Frames]
					if !ok {
						id = st.InternStack(a.Stack(e.Frames))
						stackMap[e.Frames] = id
					}
					e.Frames = id
				}
			}
			st.Append(device, es)
		}
		detaches = append(detaches, a.AttachBatchTracker(fn, allocator.WithTrackerBuffer(opts.Buffer),
			allocator.WithDropHandler(func(n uint64) { st.NoteGap(dev, int64(n)) })))
		snap, _, _ := c.snapshot(a)
		stackMap = map[snapshot.StackID]snapshot.StackID{}
		// one table for all allocators: re-intern this one's stacks
		snap.RemapStacks(func(id snapshot.StackID) snapshot.StackID {
			if id <= 0 || int(id) >= len(snap.Stacks) {
				return snapshot.NoStack
			}
			n, ok := stackMap[id]
			if !ok {
				n = st.InternStack(snap.Stacks[id])
				stackMap[id] = n
			}
			return n
		})
		merged.Segments = append(merged.Segments, snap.Segments...)
		for len(merged.DeviceTraces) <= dev {
			merged.DeviceTraces = append(merged.DeviceTraces, nil)
		}
		if dev < len(snap.DeviceTraces) {
			merged.DeviceTraces[dev] = snap.DeviceTraces[dev]
		}
		if merged.Settings == nil {
			merged.Settings = snap.Settings
		}
	}
	var infos []store.DeviceInfo
	if opts.Devices != nil {
		infos = opts.Devices()
	}
	err = st.StartLive(merged, infos)
	close(ready)
	if opts.Devices != nil {
		crash.GoEvery(stop, opts.Interval, func() {
			for _, di := range opts.Devices() {
				st.SetDeviceInfo(di)
			}
		})
	}
	var once sync.Once
	detach = func() {
		once.Do(func() {
			close(stop)
			for _, d := range detaches {
				d()
			}
		})
	}
	if err != nil {
		detach()
		return nil, err
	}
	return detach, nil
}

// Serve serves in-process allocators over the wire protocol: new
// clients get the allocators' snapshots (cut exactly at their snapshot
// entries), then every traced entry. opts.Snapshot and opts.Stack are set
// here. stop detaches the trackers and closes the server.
func Serve(network, address string, allocs []*allocator.Allocator, opts wire.ServerOptions) (srv *wire.Server, stop func() error, err error) {
	if len(allocs) == 0 {
		return nil, nil, errors.New("monitor: serve: no allocators")
	}
	// one producer stack table across allocators
	var stMu sync.Mutex
	table := snapshot.NewStackTable()
	type key struct {
		a  int
		id snapshot.StackID
	}
	ids := map[key]snapshot.StackID{}
	intern := func(ai int, id snapshot.StackID, st func() snapshot.Stack) snapshot.StackID {
		if id <= 0 {
			return snapshot.NoStack
		}
		stMu.Lock()
		defer stMu.Unlock()
		if n, ok := ids[key{ai, id}]; ok {
			return n
		}
		n := table.Intern(st())
		ids[key{ai, id}] = n
		return n
	}
	opts.Stack = func(id snapshot.StackID) snapshot.Stack {
		stMu.Lock()
		defer stMu.Unlock()
		if st := table.Stacks(); id > 0 && int(id) < len(st) {
			return st[id]
		}
		return nil
	}
	cuts := make([]*cut, len(allocs))
	for i := range cuts {
		cuts[i] = &cut{want: -1}
	}
	var snapMu sync.Mutex // one snapshot round at a time
	var srvp *wire.Server
	ready := make(chan struct{})
	opts.Snapshot = func() (*snapshot.Snapshot, map[int]uint64) {
		<-ready
		snapMu.Lock()
		defer snapMu.Unlock()
		merged := &snapshot.Snapshot{}
		resume := map[int]uint64{}
		for ai, a := range allocs {
			snap, pos, ok := cuts[ai].snapshot(a)
			if !ok {
				pos = srvp.Published(a.Device())
			}
			resume[a.Device()] = pos
			snap.RemapStacks(func(id snapshot.StackID) snapshot.StackID {
				return intern(ai, id, func() snapshot.Stack { return snap.Stack(id) })
			})
			merged.Segments = append(merged.Segments, snap.Segments...)
			if merged.Settings == nil {
				merged.Settings = snap.Settings
			}
		}
		return merged, resume
	}
	if opts.Hello.Settings == nil {
		opts.Hello.Settings = allocs[0].Config().Settings()
	}
	if opts.Peaks == nil {
		opts.Peaks = func() []wire.DevicePeak {
			out := make([]wire.DevicePeak, 0, len(allocs))
			for _, a := range allocs {
				st := a.Stats()
				out = append(out, wire.DevicePeak{Device: a.Device(),
					ActiveBytes:   st.RequestedBytes[allocator.StatAll].Peak,
					ReservedBytes: st.ReservedBytes[allocator.StatAll].Peak})
			}
			return out
		}
	}
	srv, err = wire.Listen(network, address, opts)
	if err != nil {
		return nil, nil, err
	}
	srvp = srv
	close(ready)
	var detaches []func()
	for ai, a := range allocs {
		dev := a.Device()
		// a batch is published in one piece, but for snapshot entries,
		// whose position the cut needs
		fn := func(device int, es []snapshot.TraceEntry) {
			lastRaw, lastID := snapshot.StackID(-1), snapshot.NoStack
			start := 0
			for i := range es {
				e := &es[i]
				if raw := e.Frames; raw == lastRaw {
					e.Frames = lastID
				} else {
					e.Frames = intern(ai, raw, func() snapshot.Stack { return a.Stack(raw) })
					lastRaw, lastID = raw, e.Frames
				}
				if e.Action == snapshot.ActionSnapshot {
					srv.Publish(device, es[start:i+1])
					start = i + 1
					cuts[ai].seen(e.Size, srv.Published(device))
				}
			}
			srv.Publish(device, es[start:])
		}
		detaches = append(detaches, a.AttachBatchTracker(fn,
			allocator.WithDropHandler(func(n uint64) { srv.PublishGap(dev, n) })))
	}
	stop = func() error {
		for _, d := range detaches {
			d()
		}
		return srv.Close()
	}
	return srv, stop, nil
}
