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
			recs := recordsOf(use, dev, from)
			if len(recs) == 0 {
				continue
			}
			// match leaves each matched entry's record time (ns) in its
			// TimeUS, all 0 before (the trace has no times), untouched
			// when nothing matches
			m, byRun := match(tr, recs, len(use), from == FromFramework, allocatedAfter(s, dev, tr))
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

// isEvent reports whether a profiler records entries of action a.
func isEvent(a snapshot.Action) bool {
	_, _, ok := profiler.MemoryKindOf(a, 0)
	return ok
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

// event is one allocator event of a profiler source: its kind, the block
// address (0 where the source has none) and size (bytes, positive), the
// epoch ns it happened at.
type event struct {
	addr uint64
	size int64
	t    int64
	// total is the allocated bytes after the event, when hasTotal.
	total, active int64
	run           int32 // the run it came from
	kind          uint8
	// (the small fields last: 48 bytes, the events are a copy of every record)
	hasTotal, hasActive bool
}

// recordsOf collects the events of device dev from runs' source from,
// sorted by time.
func recordsOf(runs []*profiler.Data, dev int, from string) []event {
	n := 0
	for _, d := range runs {
		if from == FromOperatorMemory {
			n += 3 * len(d.OpMemory)
		} else {
			n += len(d.Memory)
		}
	}
	out := make([]event, 0, n)
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
				out = append(out, event{addr: m.Ptr, size: abs(m.AllocSize), t: m.TimeNS, total: m.Allocated, active: m.Active,
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
				out = append(out, event{run: int32(k), kind: profiler.MemoryMalloc, size: r.Size, t: r.AllocNS,
					total: r.AllocAllocated, active: r.AllocActive, hasTotal: r.AllocAllocated >= 0, hasActive: r.AllocActive >= 0})
				if r.ReleaseNS != 0 {
					out = append(out, event{run: int32(k), kind: profiler.MemoryFree, size: r.Size, t: r.ReleaseNS,
						total: r.RelAllocated, hasTotal: r.RelAllocated >= 0})
				}
				if r.ActiveReleaseNS != 0 {
					out = append(out, event{run: int32(k), kind: profiler.MemoryBlockFree, size: r.Size, t: r.ActiveReleaseNS})
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
					e := event{run: int32(k), t: m.TimeNS, total: m.Allocated, active: m.Active, hasTotal: true, hasActive: m.HasActive}
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

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
