package align

// The matcher as it was before it worked on the records in place
// (commit 9b9e4e9), kept as the reference TestSameAsReference compares
// Recover with.

import (
	"fmt"
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

func refRecover(s *snapshot.Snapshot, runs []Run, o Options) Result {
	var res Result
	var use []*profiler.Data
	for _, r := range runs {
		if r.Data == nil {
			continue
		}
		pid := r.PID
		if pid == 0 && o.PID != 0 { // a scan of the records, only when it can refuse
			pid = recordsPID(r.Data)
		}
		if o.PID != 0 && pid != 0 && pid != o.PID {
			res.Refused = append(res.Refused, fmt.Sprintf("%s: profiler run of process %d, the snapshot is of process %d", r.Data.Path, pid, o.PID))
			continue
		}
		use = append(use, r.Data)
	}
	used := make([]int, len(use))
	for dev, tr := range s.DeviceTraces {
		if len(tr) == 0 {
			continue
		}
		d := Device{Device: dev, Source: SourceNone}
		timed := false
		for i := range tr {
			if isEvent(tr[i].Action) {
				d.Events++
			}
			timed = timed || tr[i].TimeUS != 0
		}
		if timed {
			d.Source = SourceTrace
			res.Devices = append(res.Devices, d)
			continue
		}
		for _, from := range []string{FromFramework, FromOperatorMemory, FromMemoryRecord} {
			recs := refRecordsOf(use, dev, from)
			if len(recs) == 0 {
				continue
			}
			// match leaves each matched entry's record time (ns) in its
			// TimeUS, all 0 before (the trace has no times), untouched
			// when nothing matches
			m, byRun := refMatch(tr, recs, len(use), from == FromFramework, refAllocatedAfter(s, dev, tr))
			if m == 0 {
				continue
			}
			for k, n := range byRun {
				used[k] += n
			}
			d.Source, d.From, d.Matched = SourceRecovered, from, m
			d.Exact = make([]bool, len(tr))
			for len(s.TimeExact) <= dev {
				s.TimeExact = append(s.TimeExact, nil)
			}
			s.TimeExact[dev] = d.Exact
			var last int64
			for i := range tr {
				if ns := tr[i].TimeUS; ns != 0 {
					last = floorDiv(ns, 1000)
					d.Exact[i] = true
				}
				tr[i].TimeUS = last
			}
			break
		}
		res.Devices = append(res.Devices, d)
	}
	for k, n := range used {
		if n == 0 && len(use[k].Memory)+len(use[k].OpMemory) > 0 {
			res.Refused = append(res.Refused, fmt.Sprintf("%s: none of its memory records matches the snapshot's trace (another window or job?)", use[k].Path))
		}
	}
	return res
}

type refEvent struct {
	addr uint64
	size int64
	t    int64
	// total is the allocated bytes after the refEvent, when hasTotal.
	total, active int64
	run           int32 // the run it came from
	kind          uint8
	// (the small fields last: 48 bytes, the events are a copy of every record)
	hasTotal, hasActive bool
}

func refRecordsOf(runs []*profiler.Data, dev int, from string) []refEvent {
	n := 0
	for _, d := range runs {
		if from == FromOperatorMemory {
			n += 3 * len(d.OpMemory)
		} else {
			n += len(d.Memory)
		}
	}
	out := make([]refEvent, 0, n)
	sorted := true // the framework records' order, seen as they are read
	var last int64
	for k, d := range runs {
		switch from {
		case FromFramework:
			for i := range d.Memory {
				m := &d.Memory[i]
				if m.Device != dev || m.Ptr == 0 || m.Kind > profiler.MemoryBlockFree || m.Component != profiler.CompPTA {
					continue
				}
				out = append(out, refEvent{addr: m.Ptr, size: abs(m.AllocSize), t: m.TimeNS, total: m.Allocated, active: m.Active,
					run: int32(k), kind: m.Kind, hasTotal: m.HasAllocated, hasActive: m.HasActive})
				if m.TimeNS < last {
					sorted = false
				}
				last = m.TimeNS
			}
		case FromOperatorMemory:
			for i := range d.OpMemory {
				r := &d.OpMemory[i]
				if r.Device != dev || r.Size <= 0 || r.AllocNS == 0 {
					continue
				}
				// absent totals are -1; the release totals are those after
				// the release (FREE)
				out = append(out, refEvent{run: int32(k), kind: profiler.MemoryMalloc, size: r.Size, t: r.AllocNS,
					total: r.AllocAllocated, active: r.AllocActive, hasTotal: r.AllocAllocated >= 0, hasActive: r.AllocActive >= 0})
				if r.ReleaseNS != 0 {
					out = append(out, refEvent{run: int32(k), kind: profiler.MemoryFree, size: r.Size, t: r.ReleaseNS,
						total: r.RelAllocated, hasTotal: r.RelAllocated >= 0})
				}
				if r.ActiveReleaseNS != 0 {
					out = append(out, refEvent{run: int32(k), kind: profiler.MemoryBlockFree, size: r.Size, t: r.ActiveReleaseNS})
				}
			}
		case FromMemoryRecord:
			// totals only: the change of allocated bytes between two
			// records is a malloc (+) or a free (−); no change with a
			// change of active bytes is a block free.
			var prev *profiler.MemoryRecord
			for i := range d.Memory {
				m := &d.Memory[i]
				if m.Device != dev || !m.HasAllocated || m.Component != profiler.CompPTA {
					continue
				}
				if prev != nil {
					da, dact := m.Allocated-prev.Allocated, m.Active-prev.Active
					e := refEvent{run: int32(k), t: m.TimeNS, total: m.Allocated, active: m.Active, hasTotal: true, hasActive: m.HasActive}
					switch {
					case da > 0:
						e.kind, e.size = profiler.MemoryMalloc, da
					case da < 0:
						e.kind, e.size = profiler.MemoryFree, -da
					case m.HasActive && dact < 0:
						e.kind, e.size = profiler.MemoryBlockFree, -dact
					default:
						prev = m
						continue
					}
					out = append(out, e)
				}
				prev = m
			}
		}
	}
	// one run's records come sorted (Data.Memory is); only more runs or
	// operator_memory's three times per row need a sort
	if from != FromFramework {
		for i := 1; i < len(out); i++ {
			if out[i].t < out[i-1].t {
				sorted = false
				break
			}
		}
	}
	if !sorted {
		sort.SliceStable(out, func(a, b int) bool { return out[a].t < out[b].t })
	}
	return out
}

type refTev struct {
	addr uint64
	size int64
	idx  int32 // index in the trace
	kind uint8
}

func refAllocatedAfter(s *snapshot.Snapshot, dev int, tr []snapshot.TraceEntry) [][2]int64 {
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
func refMatch(tr []snapshot.TraceEntry, recs []refEvent, nruns int, byAddr bool, after [][2]int64) (int, []int) {
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
	ev := make([]refTev, 0, len(tr))
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
			ev = append(ev, refTev{size: abs(sz), idx: int32(i), kind: k})
			continue
		}
		ev = append(ev, refTev{addr: a, size: abs(sz), idx: int32(i), kind: k})
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
		// the same refEvent leaves the same allocated and active bytes
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
	// dist is how far the bytes the trace implies after refEvent i are from
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

// isEvent reports whether a profiler records entries of action a.
func isEvent(a snapshot.Action) bool {
	_, _, ok := profiler.MemoryKindOf(a, 0)
	return ok
}
