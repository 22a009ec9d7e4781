package store

import (
	"sort"

	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Queries. Cursor semantics: the state AFTER every entry with Time ≤ cursor;
// a cursor below the first entry's time is the initial state. Times are
// epoch µs, or entry sequence numbers in a TimeSequence log.

// Devices returns the device ids with a log, ascending.
func (s *Store) Devices() []int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]int(nil), s.ids...)
}

// TimeBase says what device's cursors mean.
func (s *Store) TimeBase(device int) TimeBase {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.devs[device]; d != nil {
		return d.base
	}
	return TimeEpochUS
}

// Bounds returns the times of the first and last entry of device's log
// (0, 0 for an empty log).
func (s *Store) Bounds(device int) (first, last int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil || d.recs.Len() == 0 {
		return 0, 0
	}
	return d.first(), d.recs.last().time
}

// first is the time of entry 0, held or thinned.
func (d *devLog) first() int64 {
	if d.off > 0 {
		return d.firstTime
	}
	return d.recs.ptr(0).time
}

// position returns the number of entries with time ≤ cursor, and whether
// that position lies before the retention window (then it is known to the
// thinned buckets' resolution only).
func (d *devLog) position(cursor int64) (int64, bool) {
	if d.off > 0 && cursor < d.thin.lastTime {
		return min(d.thin.positionIn(cursor), d.off-1), true
	}
	return d.applied(cursor), false
}

// Len returns the number of entries in device's log.
func (s *Store) Len(device int) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.devs[device]; d != nil {
		return int64(d.recs.Len())
	}
	return 0
}

// applied returns the number of entries with time ≤ cursor.
func (d *devLog) applied(cursor int64) int64 {
	return max(int64(d.recs.search(func(r *recBody) bool { return r.time > cursor })), d.off)
}

// lowerBound returns the first index ≥ from whose time is ≥ t.
func (d *devLog) lowerBound(from int, t int64) int {
	// never before the retention window (its chunk may still hold thinned entries)
	return d.recs.searchFrom(max(from, int(d.off)), func(r *recBody) bool { return r.time >= t })
}

func (d *devLog) view(j int64) entryView {
	r := d.recs.ptr(int(j))
	a := &d.attrs.list[r.attr]
	return entryView{Action: d.recs.action(int(j)), Addr: r.addr, Size: r.size, Stream: a.stream, Frames: r.frames, Pool: a.pool, HasPool: a.hasPool}
}

func (d *devLog) event(j int64, actions *snapshot.ActionTable) Event {
	r := d.recs.at(int(j))
	a := &d.attrs.list[r.attr]
	e := Event{Seq: j, Time: r.time, TraceEntry: snapshot.TraceEntry{
		Action: r.action, Addr: r.addr, Size: r.size, Stream: a.stream, Frames: r.frames,
		PoolID: a.pool, HasPoolID: a.hasPool, CompileContext: a.compileContext, UserMetadata: a.userMetadata,
	}}
	e.ActionName = actions.Name(r.action)
	if r.action == snapshot.ActionOOM {
		e.Addr, e.DeviceFree = 0, int64(r.addr)
	}
	if d.base == TimeEpochUS {
		e.TimeUS = r.time
	}
	if j < int64(len(d.ivHi)) && d.ivHi[j] >= 0 {
		e.Interval, e.TimeHi = true, d.ivHi[j]
	}
	return e
}

// measured is what Summary needs of the segment map at a cursor. A cursor
// move asks StateAt and Summary at the same cursor, so the last one is
// kept per device: checkpoints are immutable once sorted, so the same
// checkpoint means the same answer.
type measured struct {
	cp   *checkpoint // the state measured (cp.At == the cursor's position)
	live int         // every live block, even outside all segments
	fig  tiling.Figures
}

// checkpointAt returns the segment map after n entries as a sorted
// checkpoint: the nearest checkpoint at or before n, rolled forward over
// at most K entries.
func (d *devLog) checkpointAt(n int64) *checkpoint {
	ci := sort.Search(len(d.cps), func(i int) bool { return d.cps[i].At > n }) - 1
	cp := d.unpack(d.cps[max(ci, 0)])
	// stepping the cursor: roll on from the last answer when it is nearer
	// (and no checkpoint, e.g. a rebase, lies between)
	d.lastMu.Lock()
	last := d.last
	d.lastMu.Unlock()
	if last != nil && last.At <= n && last.At >= cp.At {
		cp = last
	}
	if cp.At == n {
		cp.EnsureSorted()
		return cp
	}
	st := cp.Thaw()
	for j := cp.At; j < n; j++ {
		v := d.view(j)
		st.Apply(&v, j, d.id, &d.ov)
	}
	fc := st.Freeze(n)
	d.lastMu.Lock()
	d.last = fc
	d.lastMu.Unlock()
	return fc
}

// measureAt returns Summary's view of the segment map after n entries,
// from the cache when the last query was at the same state.
func (d *devLog) measureAt(n int64) measured {
	cp := d.checkpointAt(n)
	d.lastMu.Lock()
	m := d.measured
	d.lastMu.Unlock()
	if m.cp == cp {
		return m
	}
	m = measured{cp: cp, live: len(cp.Blocks), fig: tiling.Measure(cp.Segs, cp.Blocks)}
	d.remember(m)
	return m
}

func (d *devLog) remember(m measured) {
	d.lastMu.Lock()
	d.measured = m
	d.lastMu.Unlock()
}

// StateAt returns the segment map of device at cursor.
func (s *Store) StateAt(device int, cursor int64) State {
	return query(s, device, cursor, (*devLog).atCursor, (*devLog).stateAt, State{Device: device, Cursor: cursor})
}

// Sequence-precise positions. Real captures hold several entries in one
// microsecond, which a time cursor cannot tell apart: it stands after all
// of them. A position n is the state after the first n entries of the
// log (0: the initial state, Len: everything), so stepping n by one steps
// one entry. The results' Cursor is the time of entry n−1 (the time before
// the first entry for n = 0), and Applied is n.

// Applied returns the position a time cursor stands at: the number of
// entries with time ≤ cursor.
func (s *Store) Applied(device int, cursor int64) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.devs[device]; d != nil {
		n, _ := d.position(cursor)
		return n
	}
	return 0
}

// StateAtSeq returns the segment map of device after its first n entries
// (n is clamped to [0, Len]).
func (s *Store) StateAtSeq(device int, n int64) State {
	return query(s, device, n, (*devLog).atSeq, (*devLog).stateAt, State{Device: device, Cursor: -1})
}

// query answers a query about device at q under the read lock: answer at
// the spot pos resolves q to in the device's log; unknown for a device
// without one.
func query[R any](s *Store, device int, q int64, pos func(*devLog, int64) spot, answer func(*devLog, spot) R, unknown R) R {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return unknown
	}
	return answer(d, pos(d, q))
}

// spot is where a query stands in a device's log: a time cursor, the
// position there (entries applied), and whether that position lies before
// the retention window (see position).
type spot struct {
	cursor, n int64
	thin      bool
}

// atCursor is the spot of a time cursor.
func (d *devLog) atCursor(cursor int64) spot {
	n, thin := d.position(cursor)
	return spot{cursor: cursor, n: n, thin: thin}
}

// atSeq is the spot of position n, clamped into the log.
func (d *devLog) atSeq(n int64) spot {
	n = d.clampPos(n)
	return spot{cursor: d.cursorOf(n), n: n, thin: n < d.off}
}

// stateAt is the segment map at p; a thinned spot has no map.
func (d *devLog) stateAt(p spot) State {
	if p.thin {
		return State{Device: d.id, Cursor: p.cursor, Applied: p.n, Thinned: true}
	}
	return d.state(p.cursor, p.n)
}

// clampPos keeps a position inside the log.
func (d *devLog) clampPos(n int64) int64 {
	return min(max(n, 0), int64(d.recs.Len()))
}

// cursorOf is the time cursor of position n: the time of its last applied
// entry.
func (d *devLog) cursorOf(n int64) int64 {
	if n <= 0 {
		return d.beforeFirst()
	}
	if n <= d.off { // thinned: to its bucket's resolution
		return d.thin.timeAt(n)
	}
	return d.recs.ptr(int(n - 1)).time
}

func (d *devLog) state(cursor, n int64) State {
	st := State{Device: d.id, Cursor: cursor, Applied: n}
	cp := d.checkpointAt(n)
	t := tiling.Build(d.id, cp.Segs, cp.Blocks, nil)
	st.Segments, st.Gaps = t.Segments, t.Gaps
	// Summary at this cursor (the other half of a cursor move) needs no walk
	d.remember(measured{cp: cp, live: len(cp.Blocks), fig: t.Figures})
	return st
}

// valueAt returns a series value after n entries (n = 0: the initial
// value; n = d.off: the last thinned value).
func (d *devLog) valueAt(c Column, n int64) int64 {
	sr, init := d.col(c)
	if n <= 0 {
		return init
	}
	if n == d.off {
		b := &d.thin.buckets[len(d.thin.buckets)-1]
		return [...]int64{b.lastA, b.lastL, b.lastR}[c]
	}
	return sr.at(int(n - 1))
}

// col returns a series and its initial value.
func (d *devLog) col(c Column) (valueSeries, int64) {
	switch c {
	case ColAllocated:
		return &d.allocated, d.initAllocated
	case ColReserved:
		return &d.reserved, d.initReserv
	}
	return &d.active, d.initActive
}

// Series returns per-column extremes of the active, allocated and reserved
// bytes over [t0, t1) split into columns equal spans. Each column covers the
// value entering it and every value set by an entry inside it.
func (s *Store) Series(device int, t0, t1 int64, columns int) Series {
	out := Series{T0: t0, T1: t1, Columns: max(columns, 0)}
	if columns <= 0 {
		return out
	}
	out.Active = make([]MinMax, columns)
	out.Allocated = make([]MinMax, columns)
	out.Reserved = make([]MinMax, columns)
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil || t1 <= t0 {
		return out
	}
	span := t1 - t0
	cols := int64(columns)
	i := d.lowerBound(0, t0)
	cs := t0
	for c := int64(0); c < cols; c++ {
		ce := t0 + span/cols*(c+1) + span%cols*(c+1)/cols
		j := d.lowerBound(i, ce)
		thin := d.off > 0 && cs <= d.thin.lastTime
		if thin { // the column starts in the thinned part: its buckets
			out.Active[c], out.Allocated[c], out.Reserved[c] = d.thin.column(d, cs, ce)
		}
		if !thin || j > i {
			out.Active[c] = merge(out.Active[c], d.column(ColActive, i, j), thin)
			out.Allocated[c] = merge(out.Allocated[c], d.column(ColAllocated, i, j), thin)
			out.Reserved[c] = merge(out.Reserved[c], d.column(ColReserved, i, j), thin)
		}
		i, cs = j, ce
	}
	return out
}

// merge is b, or a widened by b when both hold values.
func merge(a, b MinMax, both bool) MinMax {
	if !both {
		return b
	}
	return MinMax{min(a.Min, b.Min), max(a.Max, b.Max)}
}

func (d *devLog) column(c Column, i, j int) MinMax {
	sr, _ := d.col(c)
	v := d.valueAt(c, int64(i))
	mm := MinMax{v, v}
	if e, ok := sr.extremes(i, j); ok {
		mm.Min, mm.Max = min(mm.Min, e.Min), max(mm.Max, e.Max)
	}
	return mm
}

// Events returns the entries with t0 ≤ Time < t1, at most limit of them
// (the earliest; limit ≤ 0: all).
func (s *Store) Events(device int, t0, t1 int64, limit int) []Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil || t1 <= t0 {
		return nil
	}
	i := d.lowerBound(0, t0)
	j := d.lowerBound(i, t1)
	if limit > 0 && j-i > limit {
		j = i + limit
	}
	out := make([]Event, 0, j-i)
	for k := i; k < j; k++ {
		out = append(out, d.event(int64(k), s.actions))
	}
	return out
}

// EventsAround returns up to before entries applied at cursor (ending with
// the last applied one) followed by up to after entries not yet applied.
func (s *Store) EventsAround(device int, cursor int64, before, after int) []Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return nil
	}
	return d.eventsAround(d.applied(cursor), before, after, s.actions)
}

// EventsAroundSeq is EventsAround at position n (see StateAtSeq): up to
// before entries ending with entry n−1, then up to after from entry n.
func (s *Store) EventsAroundSeq(device int, n int64, before, after int) []Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return nil
	}
	return d.eventsAround(max(d.clampPos(n), d.off), before, after, s.actions)
}

// eventsAround lists entries around position n ≥ d.off; the thinned
// entries before the window are never listed.
func (d *devLog) eventsAround(n int64, before, after int, actions *snapshot.ActionTable) []Event {
	i := max(d.off, n-int64(max(before, 0)))
	j := min(int64(d.recs.Len()), n+int64(max(after, 0)))
	out := make([]Event, 0, j-i)
	for k := i; k < j; k++ {
		out = append(out, d.event(k, actions))
	}
	return out
}

// Summary describes device at cursor.
func (s *Store) Summary(device int, cursor int64) Summary {
	return query(s, device, cursor, (*devLog).atCursor, (*devLog).summaryAt, Summary{Device: device, Cursor: cursor})
}

// SummaryAtSeq describes device after its first n entries (see StateAtSeq).
func (s *Store) SummaryAtSeq(device int, n int64) Summary {
	return query(s, device, n, (*devLog).atSeq, (*devLog).summaryAt, Summary{Device: device, Cursor: -1})
}

// summaryAt describes the device at p.
func (d *devLog) summaryAt(p spot) Summary {
	if p.thin {
		return d.thinnedSummary(p.cursor, p.n)
	}
	return d.summary(p.cursor, p.n)
}

// thinnedSummary describes a position before the retention window: the
// times, counts and the peaks up to the window (the thinned part's running
// maxima) — its byte and segment-map figures were dropped.
func (d *devLog) thinnedSummary(cursor, n int64) Summary {
	sum := Summary{Device: d.id, Cursor: cursor, TimeBase: d.base, Applied: n, Entries: int64(d.recs.Len()), Thinned: true}
	sum.FirstTime, sum.LastTime = d.first(), d.recs.last().time
	sum.ThinnedEntries, sum.DetailFrom = d.off, d.thin.lastTime
	sum.PeakActiveBytes, sum.PeakActiveTime = d.peak(ColActive, d.off)
	sum.PeakActiveAtStart = sum.PeakActiveBytes == d.initActive && sum.PeakActiveTime == d.beforeFirst()
	sum.PeakReservedBytes, _ = d.peak(ColReserved, d.off)
	sum.PeakAllocatedBytes, _ = d.peak(ColAllocated, d.off)
	sum.OOMs = countBelow(&d.byAction[snapshot.ActionOOM], n)
	for _, g := range d.gaps {
		if g.At <= n {
			sum.Dropped += g.Missed
		}
	}
	return sum
}

func (d *devLog) summary(cursor, n int64) Summary {
	sum := Summary{Device: d.id, Cursor: cursor}
	sum.TimeBase = d.base
	sum.Applied = n
	sum.Entries = int64(d.recs.Len())
	if d.recs.Len() > 0 {
		sum.FirstTime, sum.LastTime = d.first(), d.recs.last().time
	}
	if d.off > 0 {
		sum.ThinnedEntries, sum.DetailFrom = d.off, d.thin.lastTime
	}
	sum.ActiveBytes = d.valueAt(ColActive, n)
	sum.AllocatedBytes = d.valueAt(ColAllocated, n)
	sum.ReservedBytes = d.valueAt(ColReserved, n)
	m := d.measureAt(n)
	sum.Segments = m.fig.Segments
	sum.Blocks, sum.LiveBlocks = m.fig.Blocks, m.live
	sum.MapAllocatedBytes = m.fig.Allocated
	sum.TotalFreeBytes, sum.LargestFreeBlock = m.fig.Free, m.fig.LargestFree
	sum.Fragmentation = replay.FreeFragmentation(sum.LargestFreeBlock, sum.TotalFreeBytes)
	sum.PeakActiveBytes, sum.PeakActiveTime = d.peak(ColActive, n)
	sum.PeakActiveAtStart = sum.PeakActiveBytes == d.initActive && sum.PeakActiveTime == d.beforeFirst()
	sum.PeakReservedBytes, _ = d.peak(ColReserved, n)
	sum.PeakAllocatedBytes, _ = d.peak(ColAllocated, n)
	sum.OOMs = countBelow(&d.byAction[snapshot.ActionOOM], n)
	for _, g := range d.gaps {
		if g.At <= n {
			sum.Dropped += g.Missed
		}
	}
	return sum
}

// beforeFirst is the cursor of the initial state.
func (d *devLog) beforeFirst() int64 {
	if d.recs.Len() == 0 || d.base == TimeSequence {
		return -1
	}
	return d.first() - 1
}

// peak returns the largest value over the first n entries (and the initial
// value) and the time of the first entry reaching it (beforeFirst when the
// initial value is the peak). Thinned entries count through their running
// maxima, so a peak is exact for the whole session; n ≥ d.off.
func (d *devLog) peak(c Column, n int64) (int64, int64) {
	sr, init := d.col(c)
	best, at := init, d.beforeFirst()
	if t := &d.thin; t.havePeak {
		v := [...]int64{t.peakA, t.peakL, t.peakR}[c]
		if v > best {
			best, at = v, t.peakATime // the time is kept for the active series only
		}
	}
	if mm, ok := sr.extremes(int(d.off), int(n)); ok && mm.Max > best {
		best = mm.Max
		if i := sr.firstAtLeast(int(d.off), int(n), best); i >= 0 {
			at = d.recs.ptr(i).time
		}
	}
	return best, at
}

func countBelow(seqs *positions, n int64) int { return seqs.below(n) }

// Peak returns the cursor where device's active bytes first reach their
// maximum over the whole log, and that maximum.
func (s *Store) Peak(device int) (cursor int64, activeBytes int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return 0, 0
	}
	v, at := d.peak(ColActive, int64(d.recs.Len()))
	return at, v
}

// Next returns the time of the first entry of action strictly after cursor.
func (s *Store) Next(device int, cursor int64, action snapshot.Action) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return 0, false
	}
	seqs := &d.byAction[action]
	n := d.applied(cursor)
	k := countBelow(seqs, n)
	if k == seqs.Len() {
		return 0, false
	}
	return d.recs.ptr(int(seqs.at(k))).time, true
}

// Prev returns the time of the last entry of action strictly before cursor.
func (s *Store) Prev(device int, cursor int64, action snapshot.Action) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return 0, false
	}
	seqs := &d.byAction[action]
	m := int64(d.lowerBound(0, cursor))
	k := countBelow(seqs, m) - 1
	if k < seqs.lo() || seqs.at(k) < d.off {
		return 0, false // none, or only before the retention window
	}
	return d.recs.ptr(int(seqs.at(k))).time, true
}

// NextEvent returns the time of the first entry strictly after cursor.
func (s *Store) NextEvent(device int, cursor int64) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return 0, false
	}
	n := d.applied(cursor)
	if n >= int64(d.recs.Len()) {
		return 0, false
	}
	return d.recs.ptr(int(n)).time, true
}

// PrevEvent returns the time of the last entry strictly before cursor.
func (s *Store) PrevEvent(device int, cursor int64) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil {
		return 0, false
	}
	m := d.lowerBound(0, cursor)
	if int64(m) <= d.off {
		return 0, false
	}
	return d.recs.ptr(m - 1).time, true
}

// Streams returns the streams of device's trace in order of first appearance
// (the UI labels them s0, s1, … in this order).
func (s *Store) Streams(device int) []uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil || d.recs.Len() == 0 {
		return nil
	}
	// attrs.list is in order of first appearance, but for list[0], the
	// table's zero placeholder: stream 0 comes first when an entry uses it
	// (the default stream, as in torch_npu files).
	var out []uint64
	seen := map[uint64]bool{}
	for i, a := range d.attrs.list {
		if (i == 0 && !d.attrs.usedZero) || seen[a.stream] {
			continue
		}
		seen[a.stream] = true
		out = append(out, a.stream)
	}
	return out
}
