package replay

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// timelineSnapshot is a device-0 history:
//
//	segment A 0x10000 (8 KiB) exists before the trace, holds ghost block
//	0x10000 (live, never in the trace) and 0x10800 (freed in the trace
//	without an alloc: initially active by rule (a)).
//	segment B 0x20000 (4 KiB) is allocated in the trace; a block is allocated
//	in it, and another is allocated and freed.
//	segment C 0x30000 (2 KiB) is freed in the trace.
func timelineSnapshot() *snapshot.Snapshot {
	e := func(a snapshot.Action, addr uint64, size int64) snapshot.TraceEntry {
		return snapshot.TraceEntry{Action: a, Addr: addr, Size: size, Stream: 7}
	}
	return &snapshot.Snapshot{
		Segments: []snapshot.Segment{
			{Device: 0, Address: 0x10000, TotalSize: 8192, Stream: 7, IsLarge: true, Blocks: []snapshot.Block{
				{Address: 0x10000, Size: 1024, RequestedSize: 1000, State: snapshot.StateActiveAllocated},
				{Address: 0x10400, Size: 7168, State: snapshot.StateInactive},
			}},
			{Device: 0, Address: 0x20000, TotalSize: 4096, Stream: 7, Blocks: []snapshot.Block{
				{Address: 0x20000, Size: 512, RequestedSize: 500, State: snapshot.StateActiveAllocated},
				{Address: 0x20200, Size: 3584, State: snapshot.StateInactive},
			}},
			{Device: 1, Address: 0x90000, TotalSize: 4096, Blocks: []snapshot.Block{
				{Address: 0x90000, Size: 4096, State: snapshot.StateInactive},
			}},
		},
		DeviceTraces: [][]snapshot.TraceEntry{{
			e(snapshot.ActionFreeRequested, 0x10800, 300),       // 0
			e(snapshot.ActionFreeCompleted, 0x10800, 300),       // 1
			e(snapshot.ActionSegmentAlloc, 0x20000, 4096),       // 2
			e(snapshot.ActionAlloc, 0x20000, 500),               // 3
			e(snapshot.ActionAlloc, 0x20200, 600),               // 4
			e(snapshot.ActionFreeRequested, 0x20200, 600),       // 5
			e(snapshot.ActionFreeCompleted, 0x20200, 600),       // 6
			e(snapshot.ActionSegmentFree, 0x30000, 2048),        // 7
			e(snapshot.NewActionTable().Parse("mystery"), 0, 0), // 8
		}},
	}
}

func TestTimelineStart(t *testing.T) {
	tl, err := NewTimeline(timelineSnapshot(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if tl.ActiveAtStart != 1000+300 {
		t.Errorf("ActiveAtStart = %d, want 1300 (ghost 1000 + free-first 300)", tl.ActiveAtStart)
	}
	if tl.ReservedAtStart != 8192+4096-4096+2048 {
		t.Errorf("ReservedAtStart = %d, want %d", tl.ReservedAtStart, 8192+2048)
	}
	// Initial: A (ghost + pending-free-then-allocated 0x10800) and C.
	if len(tl.Initial) != 2 || tl.Initial[0].Address != 0x10000 || tl.Initial[1].Address != 0x30000 {
		t.Fatalf("Initial segments = %+v", tl.Initial)
	}
	a := tl.Initial[0]
	want := []struct {
		addr  uint64
		size  int64
		state snapshot.BlockState
	}{
		{0x10000, 1024, snapshot.StateActiveAllocated},
		{0x10400, 0x400, snapshot.StateInactive},
		{0x10800, 512, snapshot.StateActiveAllocated}, // round_size(300): the trace has requested sizes only
		{0x10800 + 512, 8192 - 0x800 - 512, snapshot.StateInactive},
	}
	if len(a.Blocks) != len(want) {
		t.Fatalf("segment A blocks = %+v", a.Blocks)
	}
	var sum int64
	for i, w := range want {
		b := a.Blocks[i]
		if b.Address != w.addr || b.Size != w.size || b.State != w.state {
			t.Errorf("block %d = %#x/%d/%v, want %#x/%d/%v", i, b.Address, b.Size, b.State, w.addr, w.size, w.state)
		}
		sum += b.Size
	}
	if sum != a.TotalSize {
		t.Errorf("blocks tile %d bytes of %d", sum, a.TotalSize)
	}
	c := tl.Initial[1]
	if c.TotalSize != 2048 || len(c.Blocks) != 1 || c.Blocks[0].State != snapshot.StateInactive || c.Stream != 7 {
		t.Errorf("re-created segment C = %+v", c)
	}
}

func TestTimelineStateAfterMatchesSeries(t *testing.T) {
	s := timelineSnapshot()
	tl, err := NewTimeline(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	active := tl.ActiveSeries()
	reserved := tl.ReservedAtStart
	for i := -1; i < len(tl.Entries); i++ {
		if i >= 0 {
			reserved += ReservedDelta(&tl.Entries[i])
		}
		st := tl.StateAfter(i)
		var r int64
		for _, seg := range st {
			r += seg.TotalSize
		}
		if r != reserved {
			t.Errorf("after %d: Σ segments %d, reserved series %d", i, r, reserved)
		}
		_, live := tl.LiveAfter(i)
		wantActive := tl.ActiveAtStart
		if i >= 0 {
			wantActive = active[i]
		}
		if live != wantActive {
			t.Errorf("after %d: LiveAfter bytes %d, active series %d", i, live, wantActive)
		}
	}
	// After entry 1 the free-first block is gone; after 5 the block is pending.
	st := tl.StateAfter(5)
	var pending int
	for _, seg := range st {
		for _, b := range seg.Blocks {
			if b.State == snapshot.StateActivePendingFree {
				pending++
			}
		}
	}
	if pending != 1 {
		t.Errorf("after entry 5: %d pending-free blocks, want 1", pending)
	}
	// The last state equals the final snapshot's device-0 segments.
	last := tl.StateAfter(len(tl.Entries) - 1)
	if len(last) != 2 || last[1].Address != 0x20000 || len(last[1].Blocks) != 2 || last[1].Blocks[0].Size != 512 {
		t.Errorf("final state = %+v", last)
	}
}

func TestTimelineExpandableUndo(t *testing.T) {
	s := &snapshot.Snapshot{
		Segments: []snapshot.Segment{{Address: 0x100000, TotalSize: 4 << 20, IsExpandable: true, Stream: 1,
			Blocks: []snapshot.Block{{Address: 0x100000, Size: 4 << 20}}}},
		DeviceTraces: [][]snapshot.TraceEntry{{
			{Action: snapshot.ActionSegmentMap, Addr: 0x100000, Size: 2 << 20, Stream: 1},
			{Action: snapshot.ActionSegmentMap, Addr: 0x100000 + 2<<20, Size: 6 << 20, Stream: 1},
			{Action: snapshot.ActionSegmentUnmap, Addr: 0x100000 + 4<<20, Size: 2 << 20, Stream: 1},
			{Action: snapshot.ActionSegmentUnmap, Addr: 0x100000 + 6<<20, Size: 2 << 20, Stream: 1},
		}},
	}
	tl, err := NewTimeline(s, 0)
	if err != nil {
		t.Fatal(err)
	}
	sizes := func(i int) []int64 {
		var out []int64
		for _, seg := range tl.StateAfter(i) {
			out = append(out, seg.TotalSize>>20)
		}
		return out
	}
	check := func(i int, want ...int64) {
		t.Helper()
		got := sizes(i)
		if len(got) != len(want) {
			t.Fatalf("after %d: segments (MiB) %v, want %v", i, got, want)
		}
		for k := range want {
			if got[k] != want[k] {
				t.Fatalf("after %d: segments (MiB) %v, want %v", i, got, want)
			}
		}
	}
	check(3, 4)
	check(2, 4, 2) // the last unmap undone: 6..8 is not adjacent to 0..4
	check(1, 8)    // 4..6 re-mapped between 0..4 and 6..8, all merged
	check(0, 2)    // the second map cut out
	check(-1)      // nothing before the first map
	if tl.ReservedAtStart != 0 {
		t.Errorf("ReservedAtStart = %d, want 0", tl.ReservedAtStart)
	}
}

func TestNewTimelineUnknownDevice(t *testing.T) {
	if _, err := NewTimeline(timelineSnapshot(), 5); err == nil {
		t.Fatal("device 5: want error")
	}
	tl, err := NewTimeline(timelineSnapshot(), 1)
	if err != nil || tl.ReservedAtStart != 4096 || len(tl.Entries) != 0 {
		t.Fatalf("device 1: %+v %v", tl, err)
	}
}

// TestTimelineStartAllocs: Start lists rule (a) and (b) allocations in
// address order, each as the block Initial holds at that address, with its
// stream and the size the active series counts.
func TestTimelineStartAllocs(t *testing.T) {
	snap := timelineSnapshot()
	// a free_completed first: the allocation was still pending then
	snap.DeviceTraces[0] = append(snap.DeviceTraces[0], snapshot.TraceEntry{Action: snapshot.ActionFreeCompleted, Addr: 0x10c00, Size: 64, Stream: 9})
	tl, err := NewTimeline(snap, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr         uint64
		size, series int64
		state        snapshot.BlockState
		stream       uint64
	}{
		{0x10000, 1024, 1000, snapshot.StateActiveAllocated, 7}, // ghost (b): the final block
		{0x10800, 512, 300, snapshot.StateActiveAllocated, 7},   // (a) by free_requested; round_size(300)
		{0x10c00, 512, 64, snapshot.StateActivePendingFree, 9},  // (a) by free_completed; round_size(64)
	}
	got := tl.Start()
	if len(got) != len(want) {
		t.Fatalf("Start() = %+v, want %d allocations", got, len(want))
	}
	var sum int64
	for i, w := range want {
		g := &got[i]
		if g.Block.Address != w.addr || g.Block.Size != w.size || g.Size() != w.series || g.Block.State != w.state || g.Stream != w.stream {
			t.Errorf("Start()[%d] = %#x size %d series %d %v stream %d, want %#x %d %d %v %d", i,
				g.Block.Address, g.Block.Size, g.Size(), g.Block.State, g.Stream, w.addr, w.size, w.series, w.state, w.stream)
		}
		sum += g.Size()
	}
	if sum != tl.ActiveAtStart {
		t.Errorf("Σ Start sizes %d, ActiveAtStart %d", sum, tl.ActiveAtStart)
	}
	initial := map[uint64]snapshot.Block{}
	for _, seg := range tl.Initial {
		for _, b := range seg.Blocks {
			initial[b.Address] = b
		}
	}
	for _, a := range got {
		if b, ok := initial[a.Block.Address]; !ok || b.Size != a.Block.Size || b.State != a.Block.State {
			t.Errorf("Initial holds %+v at %#x, Start %+v", b, a.Block.Address, a.Block)
		}
	}
}

// TestTimelineFixturesConsistent: on every real fixture and generated
// variant, the undo-based state agrees with the series at sampled entries
// (Σ segment sizes = reserved series, Σ live = active series), blocks tile
// their segments, and undoing nothing gives back the final segment sizes.
func TestTimelineFixturesConsistent(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.pickle")
	files = append(files, fixtures(t)...)
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "bad_") {
			continue
		}
		s := mustDecode(t, f).Snapshot
		for _, dev := range s.Devices() {
			tl, err := NewTimeline(s, dev)
			if err != nil {
				t.Fatal(err)
			}
			active, reserved := tl.ActiveAtStart, tl.ReservedAtStart
			step := len(tl.Entries)/23 + 1
			for i := -1; i < len(tl.Entries); i++ {
				if i >= 0 {
					active += ActiveDelta(&tl.Entries[i])
					reserved += ReservedDelta(&tl.Entries[i])
				}
				if i != len(tl.Entries)-1 && (i+1)%step != 0 {
					continue
				}
				var r int64
				for _, seg := range tl.StateAfter(i) {
					r += seg.TotalSize
					var tiled int64
					for _, b := range seg.Blocks {
						tiled += b.Size
					}
					if tiled != seg.TotalSize {
						t.Fatalf("%s dev %d after %d: segment %#x tiled %d of %d", filepath.Base(f), dev, i, seg.Address, tiled, seg.TotalSize)
					}
				}
				if r != reserved {
					t.Errorf("%s dev %d after %d: Σ segments %d, reserved series %d", filepath.Base(f), dev, i, r, reserved)
				}
				if _, live := tl.LiveAfter(i); live != active {
					t.Errorf("%s dev %d after %d: live %d, active series %d", filepath.Base(f), dev, i, live, active)
				}
			}
			initial := map[uint64]snapshot.Block{}
			for _, seg := range tl.Initial {
				for _, b := range seg.Blocks {
					initial[b.Address] = b
				}
			}
			for _, a := range tl.Start() { // Initial leaves out those outside its segments
				if b, ok := initial[a.Block.Address]; ok && (b.Size != a.Block.Size || b.State != a.Block.State) {
					t.Errorf("%s dev %d: Initial holds %+v at %#x, Start %+v", filepath.Base(f), dev, b, a.Block.Address, a.Block)
				}
			}
		}
	}
}

// TestStatesAfter: one backward walk gives what StateAfter gives at each
// index.
func TestStatesAfter(t *testing.T) {
	c, err := DecodeFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := NewTimelineWithoutInitial(c.Snapshot, 0)
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{-1, 0, 1402, 1402, 3000, len(tl.Entries) - 1}
	got := tl.StatesAfter(idx)
	for k, i := range idx {
		if !reflect.DeepEqual(got[k], tl.StateAfter(i)) {
			t.Errorf("state after %d differs", i)
		}
	}
}
