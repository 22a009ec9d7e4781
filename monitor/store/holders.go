package store

import (
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
)

// LiveAtSeq returns the live allocations of device after its first n
// entries (n is clamped to [0, Len]), in address order, for the holders
// view: each with its requested size, stack, stream (its segment's), state
// and birth (the entry that allocated it; -1 before the log). Costs what a
// StateAtSeq does: one checkpoint restore plus at most K entries.
func (s *Store) LiveAtSeq(device int, n int64) []replay.Alloc {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return nil
	}
	n = max(d.clampPos(n), d.off) // the map before the retention window was dropped
	cp := d.checkpointAt(n)
	out := make([]replay.Alloc, 0, len(cp.Blocks))
	segs := cp.Segs // sorted by address
	for _, b := range cp.Blocks {
		a := replay.Alloc{Addr: b.Addr, Size: b.Live(), Frames: b.Frames,
			Pending: b.State == snapshot.StateActivePendingFree, Born: int(b.Born)}
		if i := sort.Search(len(segs), func(i int) bool { return segs[i].End() > b.Addr }); i < len(segs) && segs[i].Address <= b.Addr {
			a.Stream = segs[i].Stream
		}
		if b.Born >= d.off && b.Born < int64(d.recs.Len()) {
			// the trace's size, as the active series counts it (an
			// allocation that survives carries the final block's sizes)
			r := d.recs.ptr(int(b.Born))
			a.Size = r.size
			a.BornTime = r.time
			if d.base == TimeSequence {
				a.BornTime = 0
			}
		}
		out = append(out, a)
	}
	return out
}

// OpName is the name of the op at t ("" when none): OpAt for a grouper.
func (s *Store) OpName(t int64) string {
	if op, ok := s.OpAt(t); ok {
		return op.Name
	}
	return ""
}

// AnnotationOps are a capture's record_function ranges (external
// annotations, torch 2.4's user_defined entries) as ops, so that a
// snapshot alone attributes entries to them and marks its steps.
func AnnotationOps(snap *snapshot.Snapshot) []Op { return annotationOps(snap, snap.Devices()) }

// annotationOps is AnnotationOps over devices.
func annotationOps(snap *snapshot.Snapshot, devices []int) []Op {
	var out []Op
	for _, dev := range devices {
		for _, op := range replay.AnnotationOps(snap, dev) {
			op.Device = dev
			out = append(out, op)
		}
	}
	return out
}

// Categories is what every allocation of a device's log holds
// (replay/category), for a grouper's Category (explain.CategoryOf): the
// Born of LiveAtSeq's allocations index it. Computed on first use and
// again once the log has grown; nil for an unknown device.
func (s *Store) Categories(device int) *category.Table {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return nil
	}
	n := d.recs.Len()
	d.catMu.Lock()
	defer d.catMu.Unlock()
	if d.cats != nil && d.catsN == n {
		return d.cats
	}
	var start []category.Start
	for _, b := range d.cps[0].Blocks {
		if b.Born < 0 {
			start = append(start, category.Start{Addr: b.Addr, Frames: b.Frames})
		}
	}
	var e snapshot.TraceEntry
	entry := func(i int) *snapshot.TraceEntry {
		r := d.recs.ptr(i)
		e = snapshot.TraceEntry{Action: d.recs.action(i), Addr: r.addr, Frames: r.frames}
		return &e
	}
	d.cats, d.catsN = category.ClassifyFunc(int(d.off), n, entry, start, func(id snapshot.StackID) snapshot.Stack {
		if id <= 0 || int(id) >= len(s.stacks) {
			return nil
		}
		return s.stacks[id]
	}), n
	return d.cats
}

// CategorySeries returns, for each of columns equal spans of [t0, t1)
// (Series' columns), the live bytes of each memory category (indexed by
// category.Category) after the column's last entry: the timeline's
// stacked category chart. One LiveAtSeq at the window's start, then a
// walk over the window's entries, each adding its size to the category
// it allocates or taking it from the one it frees (Table.Entry), as the
// active series counts them.
func (s *Store) CategorySeries(device int, t0, t1 int64, columns int) [][category.Count]int64 {
	if columns <= 0 || t1 <= t0 {
		return nil
	}
	cats := s.Categories(device)
	if cats == nil {
		return nil
	}
	s.mu.RLock()
	d := s.devs[device]
	if d == nil {
		s.mu.RUnlock()
		return nil
	}
	p0 := d.lowerBound(0, t0)
	s.mu.RUnlock()
	var sums [category.Count]int64
	for _, a := range s.LiveAtSeq(device, int64(p0)) {
		sums[cats.Of(a.Born, a.Addr)] += a.Size
	}
	out := make([][category.Count]int64, columns)
	s.mu.RLock()
	defer s.mu.RUnlock()
	span, cols := t1-t0, int64(columns)
	i := max(p0, int(d.off))
	for c := int64(0); c < cols; c++ {
		ce := t0 + span/cols*(c+1) + span%cols*(c+1)/cols
		j := d.lowerBound(i, ce)
		for ; i < j; i++ {
			switch r := d.recs.ptr(i); d.recs.action(i) {
			case snapshot.ActionAlloc:
				sums[cats.Entry(i)] += r.size
			case snapshot.ActionFreeCompleted, snapshot.ActionFree:
				sums[cats.Entry(i)] -= r.size
			}
		}
		out[c] = sums
	}
	return out
}
