package tui

import (
	"slices"
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/replay/tiling"
)

// fakeSource is a deliberately naive Source, the oracle TestStoreAndFakeAgree
// sets the Store against: every query recomputes from the replay.Timeline
// (O(n)), which is fine for small snapshots and independent of
// store.Store's indexing. Other UI tests use a real Store (storeOf).
type fakeSource struct {
	snap *snapshot.Snapshot
	tls  map[int]*replay.Timeline
	ops  []store.Op
}

var _ Source = (*fakeSource)(nil)

func newFakeSource(s *snapshot.Snapshot, ops []store.Op) *fakeSource {
	f := &fakeSource{snap: s, tls: map[int]*replay.Timeline{}, ops: ops}
	for _, d := range s.Devices() {
		tl, err := replay.NewTimeline(s, d)
		if err != nil {
			panic(err)
		}
		f.tls[d] = tl
	}
	return f
}

func (f *fakeSource) Version() uint64 { return 1 }
func (f *fakeSource) Devices() []int  { return f.snap.Devices() }
func (f *fakeSource) timed(d int) bool {
	for _, e := range f.tls[d].Entries {
		if e.TimeUS != 0 {
			return true
		}
	}
	return false
}
func (f *fakeSource) TimeBase(d int) store.TimeBase {
	if f.timed(d) {
		return store.TimeEpochUS
	}
	return store.TimeSequence
}
func (f *fakeSource) timeOf(d, i int) int64 {
	if f.timed(d) {
		return f.tls[d].Entries[i].TimeUS
	}
	return int64(i)
}
func (f *fakeSource) Bounds(d int) (int64, int64) {
	n := len(f.tls[d].Entries)
	if n == 0 {
		return 0, 0
	}
	return f.timeOf(d, 0), f.timeOf(d, n-1)
}
func (f *fakeSource) DeviceInfo(d int) (store.DeviceInfo, bool) { return store.DeviceInfo{}, false }
func (f *fakeSource) Len(d int) int64                           { return int64(len(f.tls[d].Entries)) }
func (f *fakeSource) Stack(id snapshot.StackID) snapshot.Stack  { return f.snap.Stack(id) }

// applied is the number of entries with time ≤ cursor.
func (f *fakeSource) applied(d int, cursor int64) int {
	n := len(f.tls[d].Entries)
	return sort.Search(n, func(i int) bool { return f.timeOf(d, i) > cursor })
}

// clamp keeps a position inside device d's log.
func (f *fakeSource) clamp(d int, n int64) int { return int(min(max(n, 0), f.Len(d))) }

// cursorOf is the time cursor of position a: the time of its last applied
// entry, or just before the first.
func (f *fakeSource) cursorOf(d, a int) int64 {
	if a <= 0 {
		first, _ := f.Bounds(d)
		return first - 1
	}
	return f.timeOf(d, a-1)
}

func (f *fakeSource) StateAt(d int, cursor int64) store.State {
	return f.stateAfter(d, f.applied(d, cursor), cursor)
}

func (f *fakeSource) StateAtSeq(d int, n int64) store.State {
	a := f.clamp(d, n)
	return f.stateAfter(d, a, f.cursorOf(d, a))
}

// stateAfter is the segment map after the first a entries.
func (f *fakeSource) stateAfter(d, a int, cursor int64) store.State {
	segs := f.tls[d].StateAfter(a - 1)
	st := store.State{Device: d, Cursor: cursor, Applied: int64(a), Segments: segs}
	for _, s := range segs {
		for _, b := range s.Blocks {
			if b.State == snapshot.StateInactive {
				st.Gaps = append(st.Gaps, store.Gap{Address: b.Address, Size: b.Size})
			}
		}
	}
	return st
}

func (f *fakeSource) values(d, a int) (active, reserved int64) {
	tl := f.tls[d]
	active, reserved = tl.ActiveAtStart, tl.ReservedAtStart
	for i := 0; i < a; i++ {
		active += replay.ActiveDelta(&tl.Entries[i])
		reserved += replay.ReservedDelta(&tl.Entries[i])
	}
	return
}

func (f *fakeSource) Series(d int, t0, t1 int64, cols int) store.Series {
	s := store.Series{T0: t0, T1: t1, Columns: cols}
	for c := 0; c < cols; c++ {
		c0 := t0 + (t1-t0)*int64(c)/int64(cols)
		c1 := t0 + (t1-t0)*int64(c+1)/int64(cols)
		a0, a1 := f.applied(d, c0-1), f.applied(d, c1-1)
		mm := func(get func(int) int64) store.MinMax {
			v := get(a0)
			r := store.MinMax{Min: v, Max: v}
			for a := a0 + 1; a <= a1; a++ {
				v := get(a)
				r.Min, r.Max = min(r.Min, v), max(r.Max, v)
			}
			return r
		}
		s.Active = append(s.Active, mm(func(a int) int64 { v, _ := f.values(d, a); return v }))
		s.Allocated = append(s.Allocated, mm(func(a int) int64 { v, _ := f.values(d, a); return v }))
		s.Reserved = append(s.Reserved, mm(func(a int) int64 { _, v := f.values(d, a); return v }))
	}
	return s
}

func (f *fakeSource) event(d, i int) store.Event {
	return store.Event{Seq: int64(i), Time: f.timeOf(d, i), TraceEntry: f.tls[d].Entries[i]}
}

func (f *fakeSource) EventsAround(d int, cursor int64, before, after int) []store.Event {
	return f.eventsAround(d, f.applied(d, cursor), before, after)
}

func (f *fakeSource) EventsAroundSeq(d int, n int64, before, after int) []store.Event {
	return f.eventsAround(d, f.clamp(d, n), before, after)
}

func (f *fakeSource) eventsAround(d, a, before, after int) []store.Event {
	var out []store.Event
	for i := max(0, a-before); i < min(len(f.tls[d].Entries), a+after); i++ {
		out = append(out, f.event(d, i))
	}
	return out
}

func (f *fakeSource) OpAt(t int64) (store.Op, bool) {
	var best store.Op
	ok := false
	for _, o := range f.ops {
		if !o.IsStep && oprange.Contains(o.StartUS, o.EndUS, t) && (!ok || oprange.Inner(o.StartUS, o.EndUS, best.StartUS, best.EndUS)) {
			best, ok = o, true
		}
	}
	return best, ok
}

func (f *fakeSource) Summary(d int, cursor int64) store.Summary {
	return f.summaryAfter(d, f.applied(d, cursor), cursor)
}

func (f *fakeSource) SummaryAtSeq(d int, n int64) store.Summary {
	a := f.clamp(d, n)
	return f.summaryAfter(d, a, f.cursorOf(d, a))
}

// summaryAfter describes device d after its first a entries.
func (f *fakeSource) summaryAfter(d, a int, cursor int64) store.Summary {
	first, last := f.Bounds(d)
	s := store.Summary{Device: d, TimeBase: f.TimeBase(d), Cursor: cursor, Applied: int64(a),
		Entries: f.Len(d), FirstTime: first, LastTime: last}
	s.ActiveBytes, s.ReservedBytes = f.values(d, a)
	s.AllocatedBytes = s.ActiveBytes
	for i := 0; i <= a; i++ {
		v, _ := f.values(d, i)
		if v > s.PeakActiveBytes {
			s.PeakActiveBytes = v
		}
		if i < a && f.tls[d].Entries[i].Action == snapshot.ActionOOM {
			s.OOMs++
		}
	}
	st := f.stateAfter(d, a, cursor)
	s.Segments = len(st.Segments)
	for _, seg := range st.Segments {
		for _, b := range seg.Blocks {
			s.Blocks++
			if b.State == snapshot.StateActiveAllocated {
				s.MapAllocatedBytes += b.Size
			}
		}
	}
	for _, g := range st.Gaps {
		s.TotalFreeBytes += g.Size
		s.LargestFreeBlock = max(s.LargestFreeBlock, g.Size)
	}
	if s.TotalFreeBytes > 0 {
		s.Fragmentation = 1 - float64(s.LargestFreeBlock)/float64(s.TotalFreeBytes)
	}
	return s
}

func (f *fakeSource) Next(d int, cursor int64, act snapshot.Action) (int64, bool) {
	for i, e := range f.tls[d].Entries {
		if e.Action == act && f.timeOf(d, i) > cursor {
			return f.timeOf(d, i), true
		}
	}
	return 0, false
}

func (f *fakeSource) Prev(d int, cursor int64, act snapshot.Action) (int64, bool) {
	for i := len(f.tls[d].Entries) - 1; i >= 0; i-- {
		if t := f.timeOf(d, i); f.tls[d].Entries[i].Action == act && t < cursor {
			return t, true
		}
	}
	return 0, false
}

func (f *fakeSource) NextEvent(d int, cursor int64) (int64, bool) {
	a := f.applied(d, cursor)
	if a >= len(f.tls[d].Entries) {
		return 0, false
	}
	return f.timeOf(d, a), true
}

func (f *fakeSource) PrevEvent(d int, cursor int64) (int64, bool) {
	for i := len(f.tls[d].Entries) - 1; i >= 0; i-- {
		if t := f.timeOf(d, i); t < cursor {
			return t, true
		}
	}
	return 0, false
}

func (f *fakeSource) Peak(d int) (int64, int64) {
	var bc, bv int64
	for i := range f.tls[d].Entries {
		if v, _ := f.values(d, i+1); v > bv {
			bv, bc = v, f.timeOf(d, i)
		}
	}
	return bc, bv
}

// Streams lists the streams of d's trace in order of first appearance.
func (f *fakeSource) Streams(d int) []uint64 {
	var out []uint64
	for _, e := range f.tls[d].Entries {
		if !slices.Contains(out, e.Stream) {
			out = append(out, e.Stream)
		}
	}
	return out
}

// Retained: the fake keeps everything.
func (f *fakeSource) Retained(int) store.RetainInfo { return store.RetainInfo{} }

// Gaps: the fake's entries come from a file; none were dropped.
func (f *fakeSource) Gaps(int) []store.GapRecord { return nil }

// LiveAtSeq replays the trace forward from its start (explain.LiveAfter).
func (f *fakeSource) LiveAtSeq(d int, n int64) []replay.Alloc {
	return explain.LiveAfter(f.tls[d], f.clamp(d, n)-1)
}

func (f *fakeSource) Categories(d int) *category.Table {
	tl := f.tls[d]
	var start []category.Start
	for _, s := range tl.Start() {
		start = append(start, category.Start{Addr: s.Block.Address, Frames: tiling.BlockFrames(&s.Block)})
	}
	return category.Classify(tl.Entries, start, f.snap.Stack)
}

// CategorySeries sums the live allocations after each column's last entry
// by category.
func (f *fakeSource) CategorySeries(d int, t0, t1 int64, cols int) [][category.Count]int64 {
	if cols <= 0 || t1 <= t0 {
		return nil
	}
	cats := f.Categories(d)
	out := make([][category.Count]int64, cols)
	for c := range out {
		c1 := t0 + (t1-t0)*int64(c+1)/int64(cols)
		for _, a := range f.LiveAtSeq(d, int64(f.applied(d, c1-1))) {
			out[c][cats.Of(a.Born, a.Addr)] += a.Size
		}
	}
	return out
}

// OpsSince hands out the whole op list every time (it never changes).
func (f *fakeSource) OpsSince(uint64) ([]store.Op, int, uint64) {
	return slices.Clone(f.ops), 0, 1
}

func (f *fakeSource) OpName(t int64) string {
	op, _ := f.OpAt(t)
	return op.Name
}

// OpOf attributes an entry by its time (the fake's traces have exact times).
func (f *fakeSource) OpOf(e store.Event) (store.Op, bool) { return f.OpAt(e.Time) }
