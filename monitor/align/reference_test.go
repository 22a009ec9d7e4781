package align

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/profiler"
)

// genCase is a random trace of a loop (one or two devices, legacy frees,
// segment entries, a run of unique addresses) and its profiler runs, cut,
// mangled and split: records lost, swapped with or without their times,
// of other addresses, devices, components and kinds, without times or
// totals, runs overlapping, operator_memory rows.
func genCase(rng *rand.Rand) (*snapshot.Snapshot, []Run) {
	s := &snapshot.Snapshot{}
	var all []profiler.MemoryRecord
	var ops []profiler.OpMemory
	t := int64(1_700_000_000_000_000)
	ndev := 1 + rng.IntN(2)
	naddr := 1 + rng.IntN(40)
	steps := 1 + rng.IntN(60)
	if rng.IntN(8) == 0 {
		steps = 100 + rng.IntN(150)
	}
	legacy := rng.IntN(5) == 0
	for dev := 0; dev < ndev; dev++ {
		var tr []snapshot.TraceEntry
		var alloc, active int64
		unique := uint64(0x700000000)
		for st := 0; st < steps; st++ {
			for k := 0; k < naddr; k++ {
				addr, size := uint64(0x10000000+k*0x200000), int64(512*(1+rng.IntN(4)))
				if rng.IntN(50) == 0 {
					unique += 0x1000
					addr = unique
				}
				acts := []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted}
				if legacy {
					acts = []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFree}
				}
				t0 := t
				for _, a := range acts {
					t += 1 + int64(rng.IntN(3))
					switch a {
					case snapshot.ActionAlloc:
						alloc, active = alloc+size, active+size
					case snapshot.ActionFreeRequested:
						alloc -= size
					case snapshot.ActionFreeCompleted:
						active -= size
					case snapshot.ActionFree:
						alloc, active = alloc-size, active-size
					}
					tr = append(tr, snapshot.TraceEntry{Action: a, Addr: addr, Size: size})
					kind, sz, _ := profiler.MemoryKindOf(a, size)
					all = append(all, profiler.MemoryRecord{TimeNS: t * 1000, Component: profiler.CompPTA, Device: dev, Ptr: addr,
						AllocSize: sz, Kind: kind, Allocated: alloc, Active: active, HasAllocated: true, HasActive: !legacy})
				}
				if rng.IntN(6) == 0 {
					ops = append(ops, profiler.OpMemory{Name: "op", Size: size, AllocNS: t0 * 1000, ReleaseNS: (t0 + 1) * 1000,
						ActiveReleaseNS: (t0 + 2) * 1000 * int64(rng.IntN(2)), Device: dev,
						AllocAllocated: -1, AllocActive: -1, RelAllocated: int64(rng.IntN(3)) - 1, RelActive: -1})
				}
			}
			if rng.IntN(4) == 0 {
				tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionSegmentAlloc, Addr: 0x9000000, Size: 2 << 20})
			}
		}
		if rng.IntN(3) == 0 && len(tr) > 0 {
			tr = tr[rng.IntN(len(tr)):] // the ring lost the start
		}
		s.DeviceTraces = append(s.DeviceTraces, tr)
	}
	slices.SortStableFunc(all, func(a, b profiler.MemoryRecord) int { return int(a.TimeNS - b.TimeNS) })
	if rng.IntN(3) == 0 && len(all) > 0 { // the profiler window: a slice of the run
		lo := rng.IntN(len(all))
		all = all[lo : lo+rng.IntN(len(all)-lo+1)]
	}
	// each record mangled with probability 1/every (one pass)
	every := 2 + rng.IntN(200)
	out := make([]profiler.MemoryRecord, 0, len(all)+len(all)/every+1)
	for j := 0; j < len(all); j++ {
		r := all[j]
		if rng.IntN(every) != 0 {
			out = append(out, r)
			continue
		}
		switch rng.IntN(10) {
		case 0, 1: // lost
		case 2: // swapped with the next, times kept in order
			if j+1 < len(all) {
				n := all[j+1]
				n.TimeNS, r.TimeNS = r.TimeNS, n.TimeNS
				out = append(out, n, r)
				j++
			}
		case 3: // swapped with its times: out of order
			if j+1 < len(all) {
				out = append(out, all[j+1], r)
				j++
			}
		case 4: // another address
			x := r
			x.Ptr += 0x40
			out = append(out, r, x)
		case 5:
			x := r
			x.Component = "WORKSPACE"
			out = append(out, x, r)
		case 6:
			x := r
			x.Device = 1 - x.Device
			out = append(out, x, r)
		case 7:
			x := r
			x.Ptr, x.Kind = 0, profiler.MemoryInvalid
			out = append(out, x, r)
		case 8:
			r.TimeNS = 0
			out = append(out, r)
		case 9:
			r.HasAllocated, r.HasActive = false, false
			out = append(out, r)
		}
	}
	all = out
	if rng.IntN(6) == 0 { // no BLOCK_FREE records
		all = slices.DeleteFunc(all, func(r profiler.MemoryRecord) bool { return r.Kind == profiler.MemoryBlockFree })
	}
	if rng.IntN(6) == 0 { // totals only
		for i := range all {
			all[i].Ptr = 0
		}
	}
	var runs []Run
	switch rng.IntN(4) {
	case 0: // split at a record
		k := rng.IntN(len(all) + 1)
		runs = []Run{{Data: &profiler.Data{Path: "b", Memory: slices.Clone(all[k:])}}, {Data: &profiler.Data{Path: "a", Memory: slices.Clone(all[:k])}}}
	case 1: // dealt out: the runs overlap
		var a, b []profiler.MemoryRecord
		for i := range all {
			if rng.IntN(2) == 0 {
				a = append(a, all[i])
			} else {
				b = append(b, all[i])
			}
		}
		runs = []Run{{Data: &profiler.Data{Path: "a", Memory: a}}, {Data: &profiler.Data{Path: "b", Memory: b}}, {Data: &profiler.Data{Path: "empty"}}}
	default:
		runs = []Run{{Data: &profiler.Data{Path: "a", Memory: all}}}
	}
	if rng.IntN(3) == 0 {
		if rng.IntN(2) == 0 {
			runs[0].Data.Memory = nil
		}
		runs = append(runs, Run{Data: &profiler.Data{Path: "ops", OpMemory: ops}})
	}
	return s, runs
}

func cloneCase(s *snapshot.Snapshot, runs []Run) (*snapshot.Snapshot, []Run) {
	c := &snapshot.Snapshot{Segments: s.Segments}
	for _, tr := range s.DeviceTraces {
		c.DeviceTraces = append(c.DeviceTraces, slices.Clone(tr))
	}
	var rs []Run
	for _, r := range runs {
		d := *r.Data
		d.Memory, d.OpMemory = slices.Clone(d.Memory), slices.Clone(d.OpMemory)
		rs = append(rs, Run{Data: &d, PID: r.PID})
	}
	return c, rs
}

// TestSameAsReference: Recover decides exactly as the matcher before it
// worked on the records in place (ref_test.go), on random cases that reach
// every path: views with and without a list of positions, copied runs,
// the position lists built (long scans), no BLOCK_FREE, the sources
// without addresses.
func TestSameAsReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 31))
	n := 1500
	if testing.Short() || raceEnabled {
		n = 300
	}
	indexed, lazyOK, lazyFailed := 0, 0, 0
	for c := 0; c < n; c++ {
		s, runs := genCase(rng)
		s1, r1 := cloneCase(s, runs)
		s2, r2 := cloneCase(s, runs)
		want := refRecover(s1, r1, Options{})
		got := Recover(s2, r2, Options{})
		if !sameResult(want, got) {
			t.Fatalf("case %d: result\n%+v\nwant\n%+v", c, got, want)
		}
		for dev := range s1.DeviceTraces {
			for i := range s1.DeviceTraces[dev] {
				if a, b := s1.DeviceTraces[dev][i].TimeUS, s2.DeviceTraces[dev][i].TimeUS; a != b {
					t.Fatalf("case %d: device %d entry %d: time %d, want %d", c, dev, i, b, a)
				}
			}
		}
		if !slices.EqualFunc(s1.TimeExact, s2.TimeExact, slices.Equal) {
			t.Fatalf("case %d: TimeExact differs", c)
		}
		// which paths did the walk of device 0's FRAMEWORK records take?
		s3, r3 := cloneCase(s, runs)
		var use []*profiler.Data
		for _, r := range r3 {
			use = append(use, r.Data)
		}
		if v := recordsOf(use, 0, FromFramework); v.n > 0 && len(s3.DeviceTraces[0]) > 0 {
			ts := scanTrace(s3, 0, s3.DeviceTraces[0], true)
			m := newMatcher(s3.DeviceTraces[0], &ts, &v, true)
			_, _, _, ok := m.run(len(use))
			switch {
			case !ok:
				lazyFailed++
			case v.lazy:
				lazyOK++
			}
			if m.indexed {
				indexed++
			}
		}
	}
	t.Logf("%d cases: %d built the position lists, %d walked the records in place, %d gave that up", n, indexed, lazyOK, lazyFailed)
	if indexed == 0 || lazyOK == 0 || lazyFailed == 0 {
		t.Error("a path was not taken")
	}
}

func sameResult(a, b Result) bool {
	return slices.Equal(a.Refused, b.Refused) && slices.EqualFunc(a.Devices, b.Devices, func(x, y Device) bool {
		return x.Device == y.Device && x.Source == y.Source && x.From == y.From && x.Events == y.Events &&
			x.Matched == y.Matched && (x.Exact == nil) == (y.Exact == nil) && slices.Equal(x.Exact, y.Exact)
	})
}
