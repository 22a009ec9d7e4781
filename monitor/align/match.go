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
// entry and the next entry equal to the record are found (per-key position
// lists, a binary search), and the way that keeps clearly more (a quarter) of
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
// them too, from the allocated blocks of the final state walked back
// (allocatedAfter). Two events a step apart differ by what the step kept;
// where a loop keeps nothing the steps cannot be told apart without times.

type tev struct {
	addr uint64
	size int64
	idx  int32 // index in the trace
	kind uint8
}

// key is a kind and an address in one word (device addresses are below
// 2^62), so the map hashes a uint64.
type key uint64

func keyOf(kind uint8, addr uint64) key { return key(addr<<2 | uint64(kind&3)) }

// allocatedAfter returns, per entry of tr (device dev of s), the
// allocated and active bytes after it: the final state's allocated blocks, walked back
// through the trace with requests rounded as the allocator rounds them.
func allocatedAfter(s *snapshot.Snapshot, dev int, tr []snapshot.TraceEntry) [][2]int64 {
	var a, act int64
	for i := range s.Segments {
		sg := &s.Segments[i]
		if sg.Device != dev {
			continue
		}
		for _, b := range sg.Blocks {
			if b.State == snapshot.StateActiveAllocated {
				a += b.Size
			}
			if b.State.Active() {
				act += b.Size
			}
		}
	}
	round := replay.SizeRounder(s)
	out := make([][2]int64, len(tr))
	for i := len(tr) - 1; i >= 0; i-- {
		out[i] = [2]int64{a, act}
		switch tr[i].Action {
		case snapshot.ActionAlloc:
			a -= round(tr[i].Size)
			act -= round(tr[i].Size)
		case snapshot.ActionFreeRequested:
			a += round(tr[i].Size)
		case snapshot.ActionFreeCompleted:
			act += round(tr[i].Size)
		case snapshot.ActionFree:
			a += round(tr[i].Size)
			act += round(tr[i].Size)
		}
	}
	return out
}

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

// match aligns trace tr with recs and writes each matched entry's record
// time (epoch ns) into its TimeUS. It returns the number matched and, per run, how many
// matches its records gave.
func match(tr []snapshot.TraceEntry, recs []event, nruns int, byAddr bool, after [][2]int64) (int, []int) {
	// a source with no BLOCK_FREE records its frees as FREE (the legacy
	// free action): free_completed entries then have no record.
	hasBlockFree := false
	for i := range recs {
		if recs[i].kind == profiler.MemoryBlockFree {
			hasBlockFree = true
			break
		}
	}
	// per key, the positions of its records and of its trace events: a
	// dense id per key (a map behind a small direct-mapped cache, as a
	// trace repeats its few addresses), then each id's positions as one
	// slice of a flat array (counted first, so nothing grows)
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
	// the trace's events, their ids with them (one pass)
	ev := make([]tev, 0, len(tr))
	var evID []int32
	if byAddr {
		evID = make([]int32, 0, len(tr))
	}
	for i := range tr {
		k, sz, ok := profiler.MemoryKindOf(tr[i].Action, tr[i].Size)
		if !ok || (!hasBlockFree && k == profiler.MemoryBlockFree) {
			continue
		}
		a := tr[i].Addr
		if !byAddr {
			ev = append(ev, tev{size: abs(sz), idx: int32(i), kind: k})
			continue
		}
		ev = append(ev, tev{addr: a, size: abs(sz), idx: int32(i), kind: k})
		x := id(keyOf(k, a))
		evID = append(evID, x)
		count[x][1]++
	}
	recID := make([]int32, len(recs))
	if !byAddr {
		evID = make([]int32, len(ev))
	}
	var recPos, evPos [][]int32
	if byAddr {
		for j := range recs {
			x := id(keyOf(recs[j].kind, recs[j].addr))
			recID[j] = x
			count[x][0]++
		}
		recFlat, evFlat := make([]int32, len(recs)), make([]int32, len(ev))
		// count becomes each id's next free slot in the flat arrays
		var ro, eo int32
		for x, c := range count {
			count[x] = [2]int32{ro, eo}
			ro, eo = ro+c[0], eo+c[1]
		}
		for j, x := range recID {
			recFlat[count[x][0]] = int32(j)
			count[x][0]++
		}
		for i, x := range evID {
			evFlat[count[x][1]] = int32(i)
			count[x][1]++
		}
		recPos, evPos = make([][]int32, len(count)), make([][]int32, len(count))
		ro, eo = 0, 0
		for x, c := range count { // c is now each id's end
			recPos[x], evPos[x] = recFlat[ro:c[0]:c[0]], evFlat[eo:c[1]:c[1]]
			ro, eo = c[0], c[1]
		}
	}
	posOf := func(pos [][]int32, x int32) []int32 {
		if !byAddr {
			return nil
		}
		return pos[x]
	}
	eq := func(i, j int) bool {
		r := &recs[j]
		if ev[i].kind != r.kind || ev[i].addr != r.addr || !fits(ev[i].size, r.size) {
			return false
		}
		if after == nil {
			return true
		}
		// the same event leaves the same allocated and active bytes
		// behind: an address reused a step later does not (Note [Totals
		// check])
		a := &after[ev[i].idx]
		return (!r.hasTotal || near(a[0], r.total)) && (!r.hasActive || near(a[1], r.active))
	}
	// next finds the first position after from in pos (or, without
	// addresses, in [from+1, from+scanMax]) for which ok holds; -1 if none.
	next := func(pos []int32, from, n int, ok func(int) bool) int {
		if byAddr {
			k := sort.Search(len(pos), func(x int) bool { return int(pos[x]) > from })
			for ; k < len(pos); k++ {
				if ok(int(pos[k])) {
					return int(pos[k])
				}
			}
			return -1
		}
		for x := from + 1; x < n && x <= from+scanMax; x++ {
			if ok(x) {
				return x
			}
		}
		return -1
	}
	// score counts how many of the syncLen trace events from i find their
	// record in order from j, passing over a few lost records or unseen
	// entries, as the walk itself would.
	score := func(i, j int) int {
		s := 0
		for ii, jj := i, j; ii < len(ev) && ii < i+syncLen && jj < len(recs); {
			if eq(ii, jj) {
				s++
				ii++
				jj++
				continue
			}
			found := false
			for x := jj + 1; x < len(recs) && x <= jj+4; x++ {
				if eq(ii, x) {
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
	// off is what the trace's implied totals exceeded the records' by at
	// the last match: blocks rounded otherwise than the trace's rule leave
	// a constant difference.
	var off [2]int64
	// dist is how far the bytes the trace implies after event i are from
	// record j's totals (less off): the tie-break of two ways back in step.
	dist := func(i, j int) int64 {
		if after == nil {
			return 0
		}
		a, r := &after[ev[i].idx], &recs[j]
		var d int64
		if r.hasTotal {
			d += abs(a[0] - r.total - off[0])
		}
		if r.hasActive {
			d += abs(a[1] - r.active - off[1])
		}
		return d
	}
	byRun := make([]int, nruns)
	m := 0
	i, j := 0, 0
	for i < len(ev) && j < len(recs) {
		if eq(i, j) {
			if after != nil {
				a := &after[ev[i].idx]
				off = [2]int64{a[0] - recs[j].total, a[1] - recs[j].active}
			}
			tr[ev[i].idx].TimeUS = recs[j].t
			byRun[recs[j].run]++
			m++
			i++
			j++
			continue
		}
		ii, jj := i, j
		p := next(posOf(recPos, evID[ii]), jj, len(recs), func(x int) bool { return eq(ii, x) })
		q := next(posOf(evPos, recID[jj]), ii, len(ev), func(x int) bool { return eq(x, jj) })
		switch {
		case p < 0 && q < 0:
			i++
			j++
		case p < 0:
			i = q
		case q < 0:
			j = p
		default:
			sp, sq := score(i, p), score(q, j)
			dp, dq := dist(i, p), dist(q, j)
			var toP bool
			switch {
			case sp >= sq+syncLen/4 || sq >= sp+syncLen/4:
				toP = sp > sq
			case p-j != q-i:
				toP = p-j < q-i
			default:
				toP = dp < dq
			}
			if toP {
				j = p
			} else {
				i = q
			}
		}
	}
	return m, byRun
}
