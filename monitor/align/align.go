// Package align recovers the times of a snapshot's trace entries from the
// torch_npu profiler runs of the same job (docs/timerecovery.md).
//
// torch_npu's snapshots carry no time_us, but a profiler run with
// profile_memory=True records the same caching-allocator events with its
// own clock: a torch.memory_usage record per alloc (MALLOC), free_requested
// (FREE) and free_completed (BLOCK_FREE). Recover aligns the two sequences
// in order and gives every matched entry the record's epoch time; entries
// the profiler did not see get the interval between the matched entries
// around them.
package align

import (
	"fmt"
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// Time sources of a device (stats --json time_source, the words of
// replay's stats).
const (
	SourceTrace     = replay.TimeSourceTrace     // the snapshot's own time_us
	SourceRecovered = replay.TimeSourceRecovered // recovered here from a profiler run
	SourceNone      = replay.TimeSourceNone      // no times
)

// What times were recovered from (time_recovered_from), best first.
const (
	FromFramework      = "framework"       // raw FRAMEWORK torch.memory_usage records (address, size, kind)
	FromOperatorMemory = "operator_memory" // operator_memory.csv / OP_MEMORY rows (size, alloc/release times)
	FromMemoryRecord   = "memory_record"   // memory_record totals (the change of allocated bytes)
)

// Device is the recovery of one device's trace.
type Device struct {
	Device int
	Source string // SourceTrace, SourceRecovered or SourceNone
	From   string // with SourceRecovered: FromFramework, FromOperatorMemory or FromMemoryRecord
	// Events is the number of the trace's allocator events a profiler
	// records (alloc, free_requested, free_completed, free); Matched how
	// many of them got a record's time.
	Events, Matched int
	// Exact[i] tells whether entry i's TimeUS is its own recovered time;
	// otherwise TimeUS is the lower bound of the interval it lies in (see
	// Snapshot.TimeInterval). nil unless Source is SourceRecovered; the snapshot's
	// TimeExact row of the device is the same slice.
	Exact []bool
}

// Share is the matched share of the allocator events (0–1; 1 for a trace
// with its own times).
func (d *Device) Share() float64 {
	if d.Source == SourceTrace {
		return 1
	}
	if d.Events == 0 {
		return 0
	}
	return float64(d.Matched) / float64(d.Events)
}

// Run is one profiler run offered to Recover.
type Run struct {
	Data *profiler.Data
	// PID is the process the run profiled (its directory name or records),
	// 0 when unknown.
	PID uint64
}

// Options tune Recover.
type Options struct {
	// PID is the process that wrote the snapshot (from its file name), 0
	// when unknown. A run of another process is refused.
	PID uint64
}

// Result is what Recover did.
type Result struct {
	Devices []Device // one per device with a trace, ascending
	// Refused holds one line per run not used, saying why.
	Refused []string
}

// Device returns the recovery of device dev, nil if it has no trace.
func (r *Result) Device(dev int) *Device {
	for i := range r.Devices {
		if r.Devices[i].Device == dev {
			return &r.Devices[i]
		}
	}
	return nil
}

// Recover sets TimeUS on the trace entries of every device of s that has no
// times of its own, from runs. A matched entry gets the record's epoch
// time (floored to µs, the profiler's own conversion); an unmatched one the
// time of the nearest matched entry before it (the lower bound of its
// interval; 0 before the first), so times stay monotone and every search
// by time still holds. Devices whose trace has times are left alone
// (SourceTrace).
func Recover(s *snapshot.Snapshot, runs []Run, o Options) Result {
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
	totals := false // some run has memory records to match
	for _, d := range use {
		totals = totals || len(d.Memory)+len(d.OpMemory) > 0
	}
	for dev, tr := range s.DeviceTraces {
		if len(tr) == 0 {
			continue
		}
		d := Device{Device: dev, Source: SourceNone}
		ts := scanTrace(s, dev, tr, totals)
		d.Events = ts.events
		if ts.timed {
			d.Source = SourceTrace
			res.Devices = append(res.Devices, d)
			continue
		}
		for _, from := range []string{FromFramework, FromOperatorMemory, FromMemoryRecord} {
			recs := recordsOf(use, dev, from)
			if recs.n == 0 {
				continue
			}
			// the trace has no times: the walk gives them, and leaves it
			// untouched when nothing matches
			m, byRun, exact, ok := newMatcher(tr, &ts, &recs, from == FromFramework).run(len(use))
			if !ok { // not all the device's in time order: walk again on those that are
				recs = frameworkOf(use, dev, false)
				m, byRun, exact, _ = newMatcher(tr, &ts, &recs, true).run(len(use))
			}
			if m == 0 {
				continue
			}
			for k, n := range byRun {
				used[k] += n
			}
			d.Source, d.From, d.Matched, d.Exact = SourceRecovered, from, m, exact
			for len(s.TimeExact) <= dev {
				s.TimeExact = append(s.TimeExact, nil)
			}
			s.TimeExact[dev] = d.Exact
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

// recordsPID is the process id the run's memory records name, 0 if none.
func recordsPID(d *profiler.Data) uint64 {
	for i := range d.Memory {
		if d.Memory[i].PID != 0 {
			return d.Memory[i].PID
		}
	}
	return 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// frameworkRecord reports whether FRAMEWORK record m is an allocator event
// of device dev's caching allocator.
func frameworkRecord(m *profiler.MemoryRecord, dev int) bool {
	return m.Device == dev && m.Ptr != 0 && m.Kind <= profiler.MemoryBlockFree && m.Component == profiler.CompPTA
}

// recordsOf is the records of device dev from runs' source from, in time
// order. The FRAMEWORK records of the only run that has records are a
// lazy view of them in place (Note [Records in place]); those of more runs
// are copied, as are the records the other sources imply.
func recordsOf(runs []*profiler.Data, dev int, from string) recView {
	if from == FromFramework {
		return frameworkOf(runs, dev, true)
	}
	n := 0
	for _, d := range runs {
		if from == FromOperatorMemory {
			n += 3 * len(d.OpMemory)
		} else {
			n += len(d.Memory)
		}
	}
	v := recView{m: make([]profiler.MemoryRecord, 0, n), run: make([]int32, 0, n)}
	add := func(k int, r profiler.MemoryRecord) {
		v.m = append(v.m, r)
		v.run = append(v.run, int32(k))
	}
	for k, d := range runs {
		switch from {
		case FromOperatorMemory:
			for i := range d.OpMemory {
				r := &d.OpMemory[i]
				if r.Device != dev || r.Size <= 0 || r.AllocNS == 0 {
					continue
				}
				// absent totals are -1; the release totals are those after
				// the release (FREE)
				add(k, profiler.MemoryRecord{Kind: profiler.MemoryMalloc, AllocSize: r.Size, TimeNS: r.AllocNS,
					Allocated: r.AllocAllocated, Active: r.AllocActive, HasAllocated: r.AllocAllocated >= 0, HasActive: r.AllocActive >= 0})
				if r.ReleaseNS != 0 {
					add(k, profiler.MemoryRecord{Kind: profiler.MemoryFree, AllocSize: r.Size, TimeNS: r.ReleaseNS,
						Allocated: r.RelAllocated, HasAllocated: r.RelAllocated >= 0})
				}
				if r.ActiveReleaseNS != 0 {
					add(k, profiler.MemoryRecord{Kind: profiler.MemoryBlockFree, AllocSize: r.Size, TimeNS: r.ActiveReleaseNS})
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
					e := profiler.MemoryRecord{TimeNS: m.TimeNS, Allocated: m.Allocated, Active: m.Active, HasAllocated: true, HasActive: m.HasActive}
					switch {
					case da > 0:
						e.Kind, e.AllocSize = profiler.MemoryMalloc, da
					case da < 0:
						e.Kind, e.AllocSize = profiler.MemoryFree, -da
					case m.HasActive && dact < 0:
						e.Kind, e.AllocSize = profiler.MemoryBlockFree, -dact
					default:
						prev = m
						continue
					}
					add(k, e)
				}
				prev = m
			}
		}
	}
	v.n = len(v.m)
	sorted := true
	for i := range v.m {
		v.blockFree = v.blockFree || v.m[i].Kind == profiler.MemoryBlockFree
		if i > 0 && v.m[i].TimeNS < v.m[i-1].TimeNS {
			sorted = false
		}
	}
	// one run's records come sorted (Data.Memory is); only more runs or
	// operator_memory's three times per row need a sort
	if !sorted {
		v.sel = sortedPositions(v.m, nil)
	}
	return v
}

// frameworkOf is recordsOf of the FRAMEWORK records; with lazy, the
// records of the only run that has any are a lazy view (Note [Records in
// place]).
func frameworkOf(runs []*profiler.Data, dev int, lazy bool) recView {
	with := -1 // the run with records
	for k, d := range runs {
		if len(d.Memory) > 0 {
			if with >= 0 {
				lazy = false
			}
			with = k
		}
	}
	if with < 0 {
		return recView{}
	}
	if lazy {
		return recView{m: runs[with].Memory, run0: int32(with), n: len(runs[with].Memory), lazy: true, dev: dev}
	}
	type runRecs struct {
		n         int
		sel       []int32 // positions of its records, nil: all of them
		sorted    bool
		blockFree bool
	}
	rs := make([]runRecs, len(runs))
	with = 0 // runs with records
	for k, d := range runs {
		r := &rs[k]
		r.sorted = true
		partial := false
		var last int64
		for i := range d.Memory {
			m := &d.Memory[i]
			if !frameworkRecord(m, dev) {
				if !partial {
					partial = true
					r.sel = make([]int32, r.n, len(d.Memory)-1)
					for x := range r.sel {
						r.sel[x] = int32(x)
					}
				}
				continue
			}
			if partial {
				r.sel = append(r.sel, int32(i))
			}
			if r.n > 0 && m.TimeNS < last {
				r.sorted = false
			}
			last = m.TimeNS
			r.blockFree = r.blockFree || m.Kind == profiler.MemoryBlockFree
			r.n++
		}
		if r.n > 0 {
			with++
		}
	}
	var v recView
	if with == 1 {
		for k := range rs {
			r := &rs[k]
			if r.n == 0 {
				continue
			}
			v = recView{m: runs[k].Memory, sel: r.sel, run0: int32(k), n: r.n, blockFree: r.blockFree}
			if !r.sorted {
				v.sel = sortedPositions(v.m, v.sel)
			}
		}
		return v
	}
	for k := range rs {
		v.n += rs[k].n
		v.blockFree = v.blockFree || rs[k].blockFree
	}
	if v.n == 0 {
		return v
	}
	// more runs: their records copied in the order of the runs, then put
	// in time order (stably)
	v.m, v.run = make([]profiler.MemoryRecord, 0, v.n), make([]int32, 0, v.n)
	sorted := true
	for k, d := range runs {
		r := &rs[k]
		for x := 0; x < r.n; x++ {
			i := x
			if r.sel != nil {
				i = int(r.sel[x])
			}
			if len(v.m) > 0 && d.Memory[i].TimeNS < v.m[len(v.m)-1].TimeNS {
				sorted = false
			}
			v.m = append(v.m, d.Memory[i])
			v.run = append(v.run, int32(k))
		}
	}
	if !sorted {
		v.sel = sortedPositions(v.m, nil)
	}
	return v
}

// sortedPositions is the positions sel names (nil: all of m), stably
// sorted by the time of m's records.
func sortedPositions(m []profiler.MemoryRecord, sel []int32) []int32 {
	if sel == nil {
		sel = make([]int32, len(m))
		for i := range sel {
			sel[i] = int32(i)
		}
	}
	sort.SliceStable(sel, func(a, b int) bool { return m[sel[a]].TimeNS < m[sel[b]].TimeNS })
	return sel
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
