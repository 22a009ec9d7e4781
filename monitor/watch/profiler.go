package watch

import (
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/profiler"
)

// Profiler sources: a torch_npu profiler directory read whole
// (IngestProfiler) or followed while the profiler writes it (ProfilerTail).
// Ops keep their epoch times; PTA memory records that carry a pointer
// become a per-device trace, since they are the only memory history a
// profiler directory has.

// IngestProfiler loads a profiler directory's data into store: its timed
// ops (with memory deltas) and, when d has raw FRAMEWORK memory records,
// its memory data (see IngestProfilerMemory). indexing, if not nil, is told
// the number of trace entries before they are indexed.
func IngestProfiler(st *store.Store, d *profiler.Data, indexing func(entries int64)) error {
	if _, err := IngestProfilerMemory(st, d, indexing); err != nil {
		return err
	}
	st.IngestOps(RunOps(d))
	return nil
}

// RunOps are the Store ops of one profiler run: its timed ops with their
// memory deltas, or, for analysed output whose ops carry no times
// (operator_details.csv), its device kernels, which have a place on the
// time axis.
func RunOps(d *profiler.Data) []store.Op {
	if ops := ProfilerOps(d.Ops, d.OpMemDeltas()); len(ops) > 0 {
		return ops
	}
	return KernelOps(d.Kernels)
}

// KernelOps converts device kernels (kernel_details.csv, the TASK table)
// to Store ops on their device's time axis.
func KernelOps(ks []profiler.Kernel) []store.Op {
	out := make([]store.Op, 0, len(ks))
	for i := range ks {
		k := &ks[i]
		start := k.StartNS / 1000
		out = append(out, store.Op{Name: k.Name, StartUS: start, EndUS: start + max(k.DurNS/1000, 0), Seq: -1,
			Device: k.Device, Step: k.Step})
	}
	return out
}

// IngestProfilerMemory makes the memory records of d that carry a pointer
// the store's memory data: a per-device trace (profilerMemory) whose byte
// series are the totals the records state, since the blocks allocated
// before the profiled window never appear in it. An analysed directory has
// such records while its FRAMEWORK files are still there; analysed CSV
// output alone has only totals, and then nothing is ingested (0 entries).
func IngestProfilerMemory(st *store.Store, d *profiler.Data, indexing func(entries int64)) (entries int64, err error) {
	snap, stated := profilerMemory(d)
	if len(snap.DeviceTraces) == 0 {
		// analysed output without pointers: the totals alone, as series
		snap, stated = profilerTotals(d)
	}
	for _, tr := range snap.DeviceTraces {
		entries += int64(len(tr))
	}
	if indexing != nil {
		indexing(entries)
	}
	if entries == 0 {
		return 0, nil
	}
	if err := st.IngestStated(snap, stated); err != nil {
		return 0, err
	}
	return entries, nil
}

// profilerTotals turns the memory records of analysed output, which carry
// totals but no pointers (memory_record.csv, MEMORY_RECORD without
// addresses), into one memory_record entry per record of the component
// npumon reads (profiler.PreferredComponent) with the totals it states.
// A record without an active column counts its allocated total as active.
// There is no block-level trace: the segment map stays empty.
func profilerTotals(d *profiler.Data) (*snapshot.Snapshot, []store.DeviceTotals) {
	snap := &snapshot.Snapshot{Stacks: []snapshot.Stack{nil}}
	var devs []store.DeviceTotals
	for dev, rows := range profiler.PreferredComponent(d) {
		if dev > maxProfilerDevice {
			continue
		}
		for len(snap.DeviceTraces) <= dev {
			snap.DeviceTraces = append(snap.DeviceTraces, nil)
			devs = append(devs, store.DeviceTotals{OK: true})
		}
		t := &devs[dev]
		last := int64(-1 << 62)
		for _, m := range rows {
			after := store.Totals{Allocated: m.Allocated, Reserved: m.Reserved, Active: m.Active}
			if !m.HasActive {
				after.Active = m.Allocated
			}
			if len(t.After) == 0 {
				t.Init = after
			}
			tus := max(m.TimeUS(), last) // keep times non-decreasing
			last = tus
			t.After = append(t.After, after)
			snap.DeviceTraces[dev] = append(snap.DeviceTraces[dev], snapshot.TraceEntry{Action: snapshot.ActionMemoryRecord, TimeUS: tus, Size: after.Allocated})
		}
	}
	return snap, devs
}

// ProfilerOps converts the timed ops among ops to Store ops; deltas, if
// not nil, holds each op's memory delta (profiler.Data.OpMemDeltas).
// Untimed ops (operator_details.csv rows) have no place on the time axis
// and are left out.
func ProfilerOps(ops []profiler.Op, deltas []int64) []store.Op {
	out := make([]store.Op, 0, len(ops))
	for i := range ops {
		o := &ops[i]
		if !o.Timed() {
			continue
		}
		op := store.Op{Name: o.Name, StartUS: o.StartUS(), EndUS: o.EndUS(), Thread: o.TID,
			Seq: o.Seq, Device: -1, Step: o.Step, IsStep: o.IsStep, InputDims: o.InputShapes}
		if i < len(deltas) {
			op.MemDelta = deltas[i]
		}
		out = append(out, op)
	}
	return out
}

// maxProfilerDevice bounds the device ids accepted from memory records, so
// a corrupt record cannot make the trace table huge.
const maxProfilerDevice = 1024

// profilerMemory turns the PTA memory records of d that carry a pointer
// into trace entries and the totals the records state
// (profiler.TraceFromMemory: MALLOC → alloc, FREE → free_requested,
// BLOCK_FREE → free_completed, or FREE → free when the source records no
// BLOCK_FREE). The records carry no segments, so the segment map stays
// empty; the blocks allocated before the first record are not in the
// trace, but they are in the totals.
func profilerMemory(d *profiler.Data) (*snapshot.Snapshot, []store.DeviceTotals) {
	snap := &snapshot.Snapshot{Stacks: []snapshot.Stack{nil}}
	var devs []store.DeviceTotals
	for _, t := range profiler.TraceFromMemory(d.Memory, maxProfilerDevice) {
		dt := store.DeviceTotals{Init: store.Totals(t.Init), OK: t.Complete, After: make([]store.Totals, len(t.After))}
		for i, a := range t.After {
			dt.After[i] = store.Totals(a)
		}
		snap.DeviceTraces = append(snap.DeviceTraces, t.Entries)
		devs = append(devs, dt)
	}
	return snap, devs
}

// ProfilerTail follows the FRAMEWORK files of profiler directories while
// they are written (profiler.Tailer) and appends their ops to a Store,
// each with its memory delta from the memory records read so far
// (profiler.MemDeltas). Memory records of a live run are not turned into
// a trace: a watched directory's memory data comes from its snapshots, or
// from a profiler directory once it is opened (Load).
type ProfilerTail struct {
	tail   *profiler.Tailer
	store  *store.Store
	deltas profiler.MemDeltas
	ops    int
}

// NewProfilerTail follows path (a *_ascend_pt directory, or a parent where
// profiler directories appear) into store. Call Poll to move it on.
func NewProfilerTail(path string, st *store.Store) (*ProfilerTail, error) {
	t, err := profiler.NewTailer(path)
	if err != nil {
		return nil, err
	}
	return &ProfilerTail{tail: t, store: st}, nil
}

// Poll reads what the profiler wrote since the last Poll and appends its
// timed ops, with their memory deltas, to the Store; it returns how many
// it appended. A read error is returned after whatever could be read was
// appended. Not safe for concurrent use (one goroutine polls).
func (p *ProfilerTail) Poll() (int, error) {
	b, err := p.tail.Poll()
	if b == nil {
		return 0, err
	}
	p.deltas.Add(b.Memory) // an op's records are written before the op itself
	if len(b.Ops) == 0 {
		return 0, err
	}
	deltas := make([]int64, len(b.Ops))
	for i := range b.Ops {
		deltas[i] = p.deltas.Of(&b.Ops[i])
	}
	ops := ProfilerOps(b.Ops, deltas)
	p.store.AppendOps(ops)
	p.ops += len(ops)
	return len(ops), err
}

// Ops is the number of ops appended so far.
func (p *ProfilerTail) Ops() int { return p.ops }
