package profiler

import (
	"slices"
	"sort"

	"github.com/npumon/npumon/internal/oprange"
)

// Read results. Every time is epoch nanoseconds (int64); the µs accessors
// floor to epoch microseconds, the unit the rest of npumon keys by.

// Op is one op range (torch op, user range or ProfilerStep#N marker).
type Op struct {
	Name           string
	StartNS, EndNS int64 // epoch ns; both 0 when the source has no times (operator_details.csv)
	DurNS          int64 // EndNS−StartNS, or the host total duration of an untimed row
	PID, TID       uint64
	FwdTID         uint64 // forward thread of a backward op (fwd/bwd link), 0 otherwise
	Seq            int64  // sequence number, -1 if none
	Scope          uint8
	Async          bool
	InputDtypes    string
	InputShapes    string
	Stack          string
	Module         string
	Step           int64 // ProfilerStep#N whose range holds the op start, -1 if none
	IsStep         bool  // the op is a ProfilerStep#N marker itself
}

// StartUS is the start in epoch µs.
func (o *Op) StartUS() int64 { return floorDiv(o.StartNS, 1000) }

// EndUS is the end in epoch µs.
func (o *Op) EndUS() int64 { return floorDiv(o.EndNS, 1000) }

// Timed reports whether the op carries epoch times.
func (o *Op) Timed() bool { return o.StartNS != 0 || o.EndNS != 0 }

// QueueRange is a task-queue enqueue or dequeue range paired from op marks.
type QueueRange struct {
	Name           string // op type
	Dequeue        bool
	StartNS, EndNS int64
	TID, PID       uint64
	CorrelationID  uint64
}

// Memory components as memory_record.csv names them.
const (
	CompPTA       = "PTA"
	CompWorkspace = "WORKSPACE"
	CompGE        = "GE"
	CompPTAGE     = "PTA+GE"
	CompAPP       = "APP"
)

// MemoryRecord is one allocator event with the totals after it.
type MemoryRecord struct {
	TimeNS       int64  // epoch ns
	Component    string // PTA, WORKSPACE, GE, PTA+GE, APP
	Device       int    // NPU ordinal, -1 for CPU / unknown
	Ptr          uint64 // 0 when the source has none (CSV)
	AllocSize    int64  // bytes, + malloc, − free; 0 when the source has none
	Kind         uint8  // MemoryMalloc, MemoryFree, MemoryBlockFree; MemoryInvalid from CSV
	Allocated    int64  // bytes
	Reserved     int64  // bytes
	Active       int64  // bytes
	HasAllocated bool   // false for APP rows
	HasActive    bool   // false where the source has no active column
	Stream       int64
	TID, PID     uint64
}

// TimeUS is the time in epoch µs.
func (m *MemoryRecord) TimeUS() int64 { return floorDiv(m.TimeNS, 1000) }

// Step is one ProfilerStep#N range.
type Step struct {
	ID             int64
	StartNS, EndNS int64
}

// Kernel is one device task from kernel_details.csv.
type Kernel struct {
	Name, Type, Core string
	StartNS, DurNS   int64
	Step             int64 // -1 if none
	Device           int   // -1 if the file has no Device_id column
}

// OpMemory is one operator_memory.csv row: an allocation attributed to an op.
// Absent times are 0, absent byte totals -1.
type OpMemory struct {
	Name                                       string
	Size                                       int64 // bytes
	AllocNS, ReleaseNS, ActiveReleaseNS        int64
	AllocAllocated, AllocReserved, AllocActive int64
	RelAllocated, RelReserved, RelActive       int64
	Stream                                     int64
	Device                                     int
}

// GCEvent is one Python garbage collection (torch.gc_record).
type GCEvent struct {
	PID            uint64
	StartNS, EndNS int64
}

// Sources of Data.
const (
	SourceFramework = "framework" // raw FRAMEWORK files decoded here
	SourceAnalysed  = "analysed"  // ASCEND_PROFILER_OUTPUT CSV/JSON
)

// Data is what ReadDir found in a profiler directory.
type Data struct {
	Path     string    // the directory read
	Source   string    // SourceFramework or SourceAnalysed
	Complete bool      // FRAMEWORK finalised (profiler_info present) / analyse.done present
	TimeBase *TimeBase // FRAMEWORK sources only
	Ops      []Op      // sorted by start time (untimed rows in file order)
	Queue    []QueueRange
	Memory   []MemoryRecord // sorted by time
	Steps    []Step
	Kernels  []Kernel
	OpMemory []OpMemory
	// ModuleMemory is npu_module_mem.csv: reserved bytes per driver module.
	ModuleMemory []MemoryRecord
	GC           []GCEvent
	Warnings     []string // tolerated problems (truncated tails, skipped records)
}

// opsFromRecords converts op_range records to epoch-timed ops.
func opsFromRecords(recs []OpRangeRecord, tb *TimeBase) []Op {
	ops := make([]Op, len(recs))
	for i := range recs {
		r := &recs[i]
		s, e := tb.EpochNS(r.StartNS), tb.EpochNS(r.EndNS)
		ops[i] = Op{
			Name: r.Name, StartNS: s, EndNS: e, DurNS: e - s, PID: r.PID, TID: r.StartTID,
			FwdTID: r.FwdTID, Seq: r.Seq, Scope: r.Scope, Async: r.Async,
			InputDtypes: r.InputDtypes, InputShapes: r.InputShapes, Stack: r.Stack, Module: r.Module,
		}
	}
	return ops
}

// memoryFromRecords keeps the NPU rows (as the analyser does) in epoch time.
func memoryFromRecords(recs []MemoryUsageRecord, tb *TimeBase) []MemoryRecord {
	out := make([]MemoryRecord, 0, len(recs))
	for i := range recs {
		r := &recs[i]
		if r.DeviceType != DeviceTypeNPU {
			continue
		}
		out = append(out, memoryRecordOf(r, tb.EpochNS(r.TimeNS)))
	}
	return out
}

func memoryRecordOf(r *MemoryUsageRecord, epochNS int64) MemoryRecord {
	comp := CompPTA
	if r.Component == ComponentWorkspace {
		comp = CompWorkspace
	}
	dev := int(r.DeviceIndex)
	if r.DeviceType != DeviceTypeNPU {
		dev = -1
	}
	return MemoryRecord{
		TimeNS: epochNS, Component: comp, Device: dev, Ptr: uint64(r.Ptr), AllocSize: r.AllocSize,
		Kind: r.DataType, Allocated: r.TotalAllocated, Reserved: r.TotalReserved, Active: r.TotalActive,
		HasAllocated: true, HasActive: true, Stream: r.StreamPtr, TID: r.TID, PID: r.PID,
	}
}

// markPairer pairs op marks into queue ranges: per (tid, name, queue side) the
// latest START is matched with the next END
// (docs/reference/profiler-format.md §2.3). It keeps unmatched STARTs across
// calls, so a tail can pair marks split between polls.
type markPairer struct {
	open map[markKey]OpMarkRecord
}

type markKey struct {
	tid     uint64
	name    string
	dequeue bool
}

func (p *markPairer) pair(marks []OpMarkRecord, tb *TimeBase) []QueueRange {
	if p.open == nil {
		p.open = map[markKey]OpMarkRecord{}
	}
	sorted := append([]OpMarkRecord(nil), marks...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].TimeNS < sorted[j].TimeNS })
	var out []QueueRange
	for _, m := range sorted {
		deq := m.Category >= MarkDequeueStart
		k := markKey{m.TID, m.Name, deq}
		switch m.Category {
		case MarkEnqueueStart, MarkDequeueStart:
			p.open[k] = m
		case MarkEnqueueEnd, MarkDequeueEnd:
			s, ok := p.open[k]
			if !ok {
				continue
			}
			delete(p.open, k)
			out = append(out, QueueRange{
				Name: m.Name, Dequeue: deq, StartNS: tb.EpochNS(s.TimeNS), EndNS: tb.EpochNS(m.TimeNS),
				TID: m.TID, PID: m.PID, CorrelationID: s.CorrelationID,
			})
		}
	}
	return out
}

// finishOps sorts ops, marks step markers, collects Steps and assigns every
// timed op to the step whose range holds its start.
func (d *Data) finishOps() {
	sort.SliceStable(d.Ops, func(i, j int) bool {
		a, b := &d.Ops[i], &d.Ops[j]
		if a.StartNS != b.StartNS {
			return a.StartNS < b.StartNS
		}
		return a.EndNS > b.EndNS // enclosing range first
	})
	d.Steps = d.Steps[:0]
	for i := range d.Ops {
		o := &d.Ops[i]
		o.Step = -1
		if id, ok := oprange.StepNumber(o.Name); ok {
			o.IsStep = true
			o.Step = id
			if o.Timed() {
				d.Steps = append(d.Steps, Step{ID: id, StartNS: o.StartNS, EndNS: o.EndNS})
			}
		}
	}
	d.assignSteps()
}

// assignSteps sorts Steps by start and gives every timed non-marker op the
// step whose range holds its start.
func (d *Data) assignSteps() {
	sort.Slice(d.Steps, func(i, j int) bool { return d.Steps[i].StartNS < d.Steps[j].StartNS })
	if len(d.Steps) == 0 {
		return
	}
	for i := range d.Ops {
		o := &d.Ops[i]
		if o.IsStep || !o.Timed() {
			continue
		}
		// last step starting at or before the op
		k := sort.Search(len(d.Steps), func(j int) bool { return d.Steps[j].StartNS > o.StartNS }) - 1
		if k >= 0 && o.StartNS <= d.Steps[k].EndNS {
			o.Step = d.Steps[k].ID
		}
	}
}

func (d *Data) sortMemory() {
	sort.SliceStable(d.Memory, func(i, j int) bool { return d.Memory[i].TimeNS < d.Memory[j].TimeNS })
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && (a < 0) {
		q--
	}
	return q
}

// OpMemDeltas returns, per op, the change of allocated bytes during the op
// (children included): with FRAMEWORK records, the sum of AllocSize of the
// PTA MALLOC and FREE records on the op's thread in [StartNS, EndNS]; with CSV records (no
// sizes, no threads), the PTA Allocated total after the op's last record
// minus the total before its first, on the device of those records.
// Untimed ops get 0. MemDeltas is the same rule for records that arrive in
// batches.
func (d *Data) OpMemDeltas() []int64 {
	var md MemDeltas
	md.Add(d.Memory)
	out := make([]int64, len(d.Ops))
	for i := range d.Ops {
		out[i] = md.Of(&d.Ops[i])
	}
	return out
}

// MemDeltas answers, per op, the change of allocated bytes during it (the
// rule of Data.OpMemDeltas) from memory records added in batches, as a
// tail reads them while the profiler writes: an op's delta counts the
// records added by the time it is asked. Whether the records carry sizes
// (FRAMEWORK) or totals only (CSV) is decided by the first batch that has
// any. It keeps 16 bytes per PTA record. The zero value is ready to use.
type MemDeltas struct {
	sized, decided bool
	by             map[uint64]*memSeries // key: TID (sized) or device (totals)
}

// memSeries is one key's records in time order: their times and the
// prefix sums of AllocSize (sized) or the Allocated totals.
type memSeries struct {
	t, sum []int64
}

// Add takes a batch of memory records (time-sorted, as Data.Memory and a
// tail batch's are; a record older than its key's last is put in place).
func (m *MemDeltas) Add(recs []MemoryRecord) {
	if len(recs) == 0 {
		return
	}
	if !m.decided {
		m.decided = true
		for i := range recs {
			if recs[i].AllocSize != 0 {
				m.sized = true
				break
			}
		}
	}
	if m.by == nil {
		m.by = map[uint64]*memSeries{}
	}
	for i := range recs {
		r := &recs[i]
		if r.Component != CompPTA || (!m.sized && !r.HasAllocated) || (m.sized && r.Kind == MemoryBlockFree) {
			continue // BLOCK_FREE returns a block to the pool: allocated bytes do not change
		}
		k, v := uint64(r.Device), r.Allocated
		if m.sized {
			k, v = r.TID, r.AllocSize
		}
		s := m.by[k]
		if s == nil {
			s = &memSeries{}
			m.by[k] = s
		}
		s.add(r.TimeNS, v, m.sized)
	}
}

// add puts one record's value in time order, after those of the same time.
func (s *memSeries) add(t, v int64, sized bool) {
	n := len(s.t)
	j := n
	if n > 0 && s.t[n-1] > t { // a late record: its place
		j = sort.Search(n, func(i int) bool { return s.t[i] > t })
	}
	if !sized {
		s.t, s.sum = slices.Insert(s.t, j, t), slices.Insert(s.sum, j, v)
		return
	}
	prev := int64(0)
	if j > 0 {
		prev = s.sum[j-1]
	}
	s.t, s.sum = slices.Insert(s.t, j, t), slices.Insert(s.sum, j, prev+v)
	for i := j + 1; i <= n; i++ { // the records after a late one count it too
		s.sum[i] += v
	}
}

// Of returns op o's change of allocated bytes from the records added so far.
func (m *MemDeltas) Of(o *Op) int64 {
	if !o.Timed() || len(m.by) == 0 {
		return 0
	}
	eval := func(s *memSeries) int64 {
		lo := sort.Search(len(s.t), func(j int) bool { return s.t[j] >= o.StartNS })
		hi := sort.Search(len(s.t), func(j int) bool { return s.t[j] > o.EndNS })
		if hi <= lo {
			return 0
		}
		before := int64(0)
		if lo > 0 {
			before = s.sum[lo-1]
		} else if !m.sized {
			before = s.sum[0] // no earlier total: count from the first record
		}
		return s.sum[hi-1] - before
	}
	if m.sized {
		if s := m.by[o.TID]; s != nil {
			return eval(s)
		}
		return 0
	}
	var d int64
	for _, s := range m.by {
		d += eval(s)
	}
	return d
}
