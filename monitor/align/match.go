package align

import (
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// syncLen is how many following pairs decide between two ways of getting
// back in step (Note [Monotone alignment]).
const syncLen = 16

// scanMax bounds the forward scan of a source without addresses.
const scanMax = 4096

// Note [Monotone alignment]
//
// The trace's allocator events and a run's records are the same events in
// the same order, each side with gaps: the trace lacks what happened
// before its ring's oldest entry, the profiler what happened outside its
// recording window, what its ring lost, and the workspace allocator's
// records are not trace entries. So the alignment walks both sequences
// once: while the heads agree (same kind, same address, a size the
// record's can be) they match; when they disagree, either the trace entry
// has no record or the record no entry. The next record equal to the trace
// entry and the next entry equal to the record are found (Note [Finding
// the next equal event]), and the way that keeps clearly more (a quarter) of
// the next syncLen pairs in step wins; else the shorter skip; else the one
// whose totals are nearer (Note [Totals check]). A loop repeats its
// addresses and totals exactly, so a lost record must not make the walk
// jump a period ahead: two ways that both get back in step are told apart
// by the distance, never by a pair more or less. Matches never cross, so the
// recovered times are monotone. Without addresses (operator_memory,
// memory_record) the key is the kind alone and a bounded forward scan finds
// the next candidate.

// totalSlack is how far the allocated bytes a trace implies may differ
// from a record's total and still be the same moment: blocks handed out
// whole (too small a remainder to split) count more than the rounded
// request.
const totalSlack = 16 << 20

// Note [Totals check]
//
// A training loop allocates the same addresses step after step, so an
// entry before a profiler window has an equal record one step later. The
// records state the allocated bytes after each event; the trace implies
// them too, from the allocated blocks of the final state less what the
// trace changed after each entry (scanTrace). Two events a step apart
// differ by what the step kept; where a loop keeps nothing the steps
// cannot be told apart without times.

// key is a kind and an address in one word (device addresses are below
// 2^62), so the map hashes a uint64.
type key uint64

func keyOf(kind uint8, addr uint64) key { return key(addr<<2 | uint64(kind&3)) }

// near reports whether the bytes a trace implies (t) can be a record's
// total (r).
func near(t, r int64) bool { return abs(t-r) <= totalSlack+r/1000 }

// fits reports whether a record of size rs can be of an entry of size es:
// the same, or the entry's request rounded up to a block (never more than
// doubled, plus the 32-byte pad and the 512-byte minimum).
// Sizes from MB/KB text may be a few bytes short.
func fits(es, rs int64) bool {
	return rs == es || (rs >= es-64 && rs <= 2*es+1024)
}

// Note [Finding the next equal event]
//
// Where the heads disagree the walk needs the next record equal to the
// trace event and the next event equal to the record. In a loop both are
// about a period ahead, so they are first looked for by a forward scan
// (scanBound positions at most); only a scan that runs out, or scans that
// together pass scanBudget times the length of both sequences, build the
// per-key position lists (a dense id per kind and address, each id's
// positions in one flat array) the rest of the walk then searches by
// binary search. Both find the first position after the head that is
// equal, so the walk takes the same steps either way; a trace of a loop
// never builds the lists.
//
// Most disagreements are a lost record or an entry the profiler did not
// see: one of the two is a position or two ahead, the other a loop's
// period. Both are first looked for within nearScan; when only one is
// found there and it keeps more than three quarters of the next syncLen
// pairs in step, the other cannot win (it is farther, so it would need a
// quarter more pairs than there are) and is not looked for.

// scanBound is the longest forward scan for the next equal event before
// the position lists are built; scanBudget bounds all scans together, per
// event of the two sequences.
// nearScan is how far the walk looks for both ways back in step before
// it looks farther for one of them.
const (
	scanBound  = 4096
	scanBudget = 4
	nearScan   = 8
)

// noKind marks an action a profiler does not record in kindOf.
const noKind = 0xff

// kindOf is the record kind of each trace action (profiler.MemoryKindOf),
// noKind for those a profiler does not record.
var kindOf = func() (t [256]uint8) {
	for a := range t {
		t[a] = noKind
		if k, _, ok := profiler.MemoryKindOf(snapshot.Action(a), 0); ok {
			t[a] = k
		}
	}
	return t
}()

// traceScan is what one pass over a device's trace finds.
type traceScan struct {
	events     int  // allocator events (what a profiler records)
	blockFrees int  // of them free_completed
	timed      bool // some entry has a time
	// after[i] plus base is the allocated and active bytes after entry i
	// (Note [Totals check]); nil when the trace is timed or no run has
	// records.
	after [][2]int64
	base  [2]int64
}

// scanTrace counts the events of trace tr (device dev of s) and, with
// totals, the bytes after each entry: the trace's changes summed forward
// (requests rounded as the allocator rounds them), based on the final
// state's allocated and active blocks.
func scanTrace(s *snapshot.Snapshot, dev int, tr []snapshot.TraceEntry, totals bool) traceScan {
	var ts traceScan
	if len(tr) > 0 && tr[0].TimeUS != 0 {
		totals = false // timed: nothing to match
	}
	var round func(int64) int64
	if totals {
		ts.after = make([][2]int64, len(tr))
		round = replay.SizeRounder(s)
	}
	var a, act int64
	for i := range tr {
		e := &tr[i]
		if k := kindOf[e.Action]; k != noKind {
			ts.events++
			if k == profiler.MemoryBlockFree {
				ts.blockFrees++
			}
		}
		if e.TimeUS != 0 {
			ts.timed = true
		}
		if !totals {
			continue
		}
		switch e.Action {
		case snapshot.ActionAlloc:
			r := round(e.Size)
			a += r
			act += r
		case snapshot.ActionFreeRequested:
			a -= round(e.Size)
		case snapshot.ActionFreeCompleted:
			act -= round(e.Size)
		case snapshot.ActionFree:
			r := round(e.Size)
			a -= r
			act -= r
		}
		ts.after[i] = [2]int64{a, act}
	}
	if ts.timed {
		ts.after = nil
		return ts
	}
	if totals {
		var fa, fact int64
		for i := range s.Segments {
			sg := &s.Segments[i]
			if sg.Device != dev {
				continue
			}
			for _, b := range sg.Blocks {
				if b.State == snapshot.StateActiveAllocated {
					fa += b.Size
				}
				if b.State.Active() {
					fact += b.Size
				}
			}
		}
		ts.base = [2]int64{fa - a, fact - act}
	}
	return ts
}

// recView is the records of one device from one source, in time order:
// those of m, or those sel names.
type recView struct {
	m   []profiler.MemoryRecord
	sel []int32 // positions in m in time order; nil: all of m, in order
	// run is the run of each record of m; nil: all are of run run0
	run       []int32
	run0      int32
	n         int  // records in the view
	blockFree bool // some record is a BLOCK_FREE
	// A lazy view is all of one run's FRAMEWORK records, taken to be the
	// device's allocator events in time order until a record read shows
	// otherwise (failed): the records before verified are checked
	// (Note [Records in place]).
	lazy, failed bool
	verified     int
	dev          int
}

func (v *recView) at(j int) *profiler.MemoryRecord {
	if v.sel == nil && j < v.verified {
		return &v.m[j]
	}
	return v.atSlow(j)
}

//go:noinline
func (v *recView) atSlow(j int) *profiler.MemoryRecord {
	if v.sel != nil {
		return &v.m[v.sel[j]]
	}
	v.verifyTo(j)
	return &v.m[j]
}

// Note [Records in place]
//
// A run's FRAMEWORK records are the walk's records where they are all of
// one device's caching allocator and in time order, which is what one
// process's run on one device holds. Checking that first would read every
// record once more (112 bytes each), so a run that is the only one with
// records is taken as such a view lazily: each record is checked when the
// walk first reads it, the ones it never reads after the walk. One that
// is not (another device, the workspace allocator, out of order) fails
// the view: the walk's times are taken back and it walks again with the
// positions of the device's records (recordsOf).

// verifyTo checks the records of a lazy view up to j.
func (v *recView) verifyTo(j int) {
	for ; v.verified <= j; v.verified++ {
		x := v.verified
		r := &v.m[x]
		if !frameworkRecord(r, v.dev) || x > 0 && r.TimeNS < v.m[x-1].TimeNS {
			v.failed = true
			v.verified = len(v.m) // no more checks: the walk is given up
			return
		}
		v.blockFree = v.blockFree || r.Kind == profiler.MemoryBlockFree
	}
}

func (v *recView) runOf(j int) int32 {
	switch {
	case v.run == nil:
		return v.run0
	case v.sel != nil:
		return v.run[v.sel[j]]
	}
	return v.run[j]
}

// matcher walks a trace's events and a view of records (Note [Monotone
// alignment]). The trace's events are its entries a profiler records, or
// those evIdx names; a record's size is its AllocSize's magnitude.
type matcher struct {
	tr     []snapshot.TraceEntry
	evIdx  []int32 // the trace index of each event; nil: every entry is one
	nev    int
	r      *recView
	byAddr bool
	after  [][2]int64 // traceScan's
	base   [2]int64
	// off is what the trace's implied totals exceeded the records' by at
	// the last match: blocks rounded otherwise than the trace's rule leave
	// a constant difference.
	off [2]int64
	// budget is the scan steps left before the position lists are built
	// (Note [Finding the next equal event]).
	budget  int
	indexed bool
	// with indexed: per event and record its key's id, per id the
	// positions of its records and events
	evID, recID   []int32
	recPos, evPos [][]int32
}

// newMatcher prepares the walk of trace tr (scanned as ts) with records r.
func newMatcher(tr []snapshot.TraceEntry, ts *traceScan, r *recView, byAddr bool) *matcher {
	m := &matcher{tr: tr, r: r, byAddr: byAddr, after: ts.after, base: ts.base, nev: len(tr)}
	if !r.lazy {
		r.verified = r.n
	}
	// a lazy view knows whether there are BLOCK_FREE records once it has
	// checked up to the first
	for r.lazy && !r.blockFree && !r.failed && r.verified < r.n {
		r.verifyTo(r.verified)
	}
	// a source with no BLOCK_FREE records its frees as FREE (the legacy
	// free action): free_completed entries then have no record.
	if ts.events < len(tr) || (!r.blockFree && ts.blockFrees > 0) {
		m.evIdx = make([]int32, 0, ts.events)
		for i := range tr {
			k := kindOf[tr[i].Action]
			if k == noKind || (!r.blockFree && k == profiler.MemoryBlockFree) {
				continue
			}
			m.evIdx = append(m.evIdx, int32(i))
		}
		m.nev = len(m.evIdx)
	}
	m.budget = scanBudget * (m.nev + r.n)
	return m
}

// ti is the trace index of event i.
func (m *matcher) ti(i int) int {
	if m.evIdx != nil {
		return int(m.evIdx[i])
	}
	return i
}

// eq reports whether record j can be event i.
func (m *matcher) eq(i, j int) bool {
	t := m.ti(i)
	e, r := &m.tr[t], m.r.at(j)
	if kindOf[e.Action] != r.Kind || (m.byAddr && e.Addr != r.Ptr) || !fits(abs(e.Size), abs(r.AllocSize)) {
		return false
	}
	if m.after == nil {
		return true
	}
	// the same event leaves the same allocated and active bytes behind:
	// an address reused a step later does not (Note [Totals check])
	a := &m.after[t]
	return (!r.HasAllocated || near(a[0]+m.base[0], r.Allocated)) && (!r.HasActive || near(a[1]+m.base[1], r.Active))
}

// nextRec is the first record after from that can be event i; -1 if none
// (without addresses: within scanMax). nextEv is its mirror (events for a
// record); the two scan loops stay apart on purpose: they read different
// arrays (records by m.r.at, events through m.ti), and one shared scan
// would test each position through a closure on Recover's hot path.
func (m *matcher) nextRec(i, from int) int {
	if m.indexed {
		return m.search(m.recPos[m.evID[i]], from, func(x int) bool { return m.eq(i, x) })
	}
	n := m.r.n
	lim := m.scanLimit(n, from)
	e := &m.tr[m.ti(i)]
	kind, addr := kindOf[e.Action], e.Addr
	for x := from + 1; x < lim; x++ {
		r := m.r.at(x)
		if r.Kind != kind || (m.byAddr && r.Ptr != addr) || !m.eq(i, x) {
			continue
		}
		m.budget -= x - from
		return x
	}
	m.budget -= lim - from
	if !m.byAddr || lim == n {
		return -1
	}
	m.index()
	return m.nextRec(i, from)
}

// scanLimit is where a linear scan after from, over n positions, stops:
// scanMax on, or with addresses what is left of the budget (at most
// scanBound) before the index is built.
func (m *matcher) scanLimit(n, from int) int {
	if m.byAddr {
		return min(n, from+1+min(scanBound, max(m.budget, 0)))
	}
	return min(n, from+1+scanMax)
}

// nextEv is the first event after from that record j can be; -1 if none
// (without addresses: within scanMax).
func (m *matcher) nextEv(j, from int) int {
	if m.indexed {
		return m.search(m.evPos[m.recID[j]], from, func(x int) bool { return m.eq(x, j) })
	}
	n := m.nev
	lim := m.scanLimit(n, from)
	r := m.r.at(j)
	for x := from + 1; x < lim; x++ {
		e := &m.tr[m.ti(x)]
		if kindOf[e.Action] != r.Kind || (m.byAddr && e.Addr != r.Ptr) || !m.eq(x, j) {
			continue
		}
		m.budget -= x - from
		return x
	}
	m.budget -= lim - from
	if !m.byAddr || lim == n {
		return -1
	}
	m.index()
	return m.nextEv(j, from)
}

// near is nextRec(h, from) (rec) or nextEv(h, from) found within
// nearScan positions, -1 if it is farther or there is none.
func (m *matcher) near(h, from int, rec bool) int {
	if rec {
		lim := min(m.r.n, from+1+nearScan)
		for x := from + 1; x < lim; x++ {
			if m.eq(h, x) {
				return x
			}
		}
		return -1
	}
	lim := min(m.nev, from+1+nearScan)
	for x := from + 1; x < lim; x++ {
		if m.eq(x, h) {
			return x
		}
	}
	return -1
}

// search is the first position in pos after from for which ok holds; -1 if
// none.
func (m *matcher) search(pos []int32, from int, ok func(int) bool) int {
	k := sort.Search(len(pos), func(x int) bool { return int(pos[x]) > from })
	for ; k < len(pos); k++ {
		if ok(int(pos[k])) {
			return int(pos[k])
		}
	}
	return -1
}

// index builds the per-key position lists: a dense id per key (a map
// behind a small direct-mapped cache, as a trace repeats its few
// addresses), then each id's positions as one slice of a flat array
// (counted first, so nothing grows).
func (m *matcher) index() {
	ids := map[key]int32{}
	const cacheBits = 12
	var cache [1 << cacheBits]struct {
		k  key
		id int32
	}
	var count [][2]int32 // per id: records, trace events
	id := func(k key) int32 {
		c := &cache[uint64(k)*0x9E3779B97F4A7C15>>(64-cacheBits)]
		if c.id > 0 && c.k == k {
			return c.id - 1
		}
		v, ok := ids[k]
		if !ok {
			v = int32(len(count))
			ids[k] = v
			count = append(count, [2]int32{})
		}
		c.k, c.id = k, v+1 // id+1: the zero slot is empty
		return v
	}
	m.evID, m.recID = make([]int32, m.nev), make([]int32, m.r.n)
	for i := range m.evID {
		e := &m.tr[m.ti(i)]
		x := id(keyOf(kindOf[e.Action], e.Addr))
		m.evID[i] = x
		count[x][1]++
	}
	for j := range m.recID {
		r := m.r.at(j)
		x := id(keyOf(r.Kind, r.Ptr))
		m.recID[j] = x
		count[x][0]++
	}
	recFlat, evFlat := make([]int32, m.r.n), make([]int32, m.nev)
	// count becomes each id's next free slot in the flat arrays
	var ro, eo int32
	for x, c := range count {
		count[x] = [2]int32{ro, eo}
		ro, eo = ro+c[0], eo+c[1]
	}
	for j, x := range m.recID {
		recFlat[count[x][0]] = int32(j)
		count[x][0]++
	}
	for i, x := range m.evID {
		evFlat[count[x][1]] = int32(i)
		count[x][1]++
	}
	m.recPos, m.evPos = make([][]int32, len(count)), make([][]int32, len(count))
	ro, eo = 0, 0
	for x, c := range count { // c is now each id's end
		m.recPos[x], m.evPos[x] = recFlat[ro:c[0]:c[0]], evFlat[eo:c[1]:c[1]]
		ro, eo = c[0], c[1]
	}
	m.indexed = true
}

// score counts how many of the syncLen trace events from i find their
// record in order from j, passing over a few lost records or unseen
// entries, as the walk itself would.
func (m *matcher) score(i, j int) int {
	s := 0
	for ii, jj := i, j; ii < m.nev && ii < i+syncLen && jj < m.r.n; {
		if m.eq(ii, jj) {
			s++
			ii++
			jj++
			continue
		}
		found := false
		for x := jj + 1; x < m.r.n && x <= jj+4; x++ {
			if m.eq(ii, x) {
				jj, found = x, true
				break
			}
		}
		if !found {
			ii++
		}
	}
	return s
}

// dist is how far the bytes the trace implies after event i are from
// record j's totals (less off): the tie-break of two ways back in step.
func (m *matcher) dist(i, j int) int64 {
	if m.after == nil {
		return 0
	}
	a, r := &m.after[m.ti(i)], m.r.at(j)
	var d int64
	if r.HasAllocated {
		d += abs(a[0] + m.base[0] - r.Allocated - m.off[0])
	}
	if r.HasActive {
		d += abs(a[1] + m.base[1] - r.Active - m.off[1])
	}
	return d
}

// run aligns the trace with the records. A matched entry gets the record's
// epoch time (floored to µs), every other entry the time of the matched
// one before it (0 before the first); exact tells which are their own.
// With nothing matched the trace is left untouched (exact nil). It returns
// the number matched and, per run, how many matches its records gave; ok
// is false, with the trace untouched, when a lazy view failed (Note
// [Records in place]).
func (m *matcher) run(nruns int) (matched int, byRun []int, exact []bool, ok bool) {
	byRun = make([]int, nruns)
	tr := m.tr
	var last int64
	filled := 0 // entries before it have their times
	i, j := 0, 0
	for i < m.nev && j < m.r.n && !m.r.failed {
		if m.eq(i, j) {
			t, r := m.ti(i), m.r.at(j)
			if m.after != nil {
				a := &m.after[t]
				m.off = [2]int64{a[0] + m.base[0] - r.Allocated, a[1] + m.base[1] - r.Active}
			}
			if exact == nil {
				exact = make([]bool, len(tr))
			}
			if r.TimeNS != 0 { // a record without a time gives none
				for k := filled; k < t; k++ {
					tr[k].TimeUS = last
				}
				last = floorDiv(r.TimeNS, 1000)
				tr[t].TimeUS, exact[t] = last, true
				filled = t + 1
			}
			byRun[m.r.runOf(j)]++
			matched++
			i++
			j++
			continue
		}
		// the nearer way back in step first: where it keeps nearly all
		// of the next syncLen pairs, the other way cannot win (it is
		// farther and cannot score a quarter more), so it is not looked
		// for (Note [Finding the next equal event])
		p, q := -1, -1
		if !m.indexed {
			p, q = m.near(i, j, true), m.near(j, i, false)
			switch {
			case p >= 0 && q >= 0:
			case q >= 0:
				if m.score(q, j) > syncLen-syncLen/4 {
					i = q
					continue
				}
				p = m.nextRec(i, j)
			case p >= 0:
				if m.score(i, p) > syncLen-syncLen/4 {
					j = p
					continue
				}
				q = m.nextEv(j, i)
			default:
				p, q = m.nextRec(i, j), m.nextEv(j, i)
			}
		} else {
			p, q = m.nextRec(i, j), m.nextEv(j, i)
		}
		switch {
		case p < 0 && q < 0:
			i++
			j++
		case p < 0:
			i = q
		case q < 0:
			j = p
		default:
			sp, sq := m.score(i, p), m.score(q, j)
			var toP bool
			switch {
			case sp >= sq+syncLen/4 || sq >= sp+syncLen/4:
				toP = sp > sq
			case p-j != q-i:
				toP = p-j < q-i
			default:
				toP = m.dist(i, p) < m.dist(q, j)
			}
			if toP {
				j = p
			} else {
				i = q
			}
		}
	}
	if m.r.lazy && m.r.n > 0 {
		m.r.verifyTo(m.r.n - 1) // the records the walk did not read
	}
	if m.r.failed {
		for k := 0; k < filled; k++ {
			tr[k].TimeUS = 0 // the trace had no times
		}
		return 0, nil, nil, false
	}
	if matched > 0 {
		for k := filled; k < len(tr); k++ {
			tr[k].TimeUS = last
		}
	}
	return matched, byRun, exact, true
}
