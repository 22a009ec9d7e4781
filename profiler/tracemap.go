package profiler

import "github.com/npumon/npumon/allocator/snapshot"

// This file is the one mapping between allocator trace entries and
// torch.memory_usage records (docs/reference/profiler-format.md), both
// ways: Recorder writes records from entries (MemoryUsageFromTrace), the
// monitor reads a profiler directory's records back as a trace
// (TraceFromMemory).
//
//	alloc           ↔ MALLOC      (+size)
//	free_requested  ↔ FREE        (−size)
//	free_completed  ↔ BLOCK_FREE  (−size)
//	free (legacy)   → FREE;  FREE → free when the source records no BLOCK_FREE
//
// Other actions (segment events, snapshots, OOM) have no record.

// MemoryKindOf is the record kind of action a and the record's signed
// size for an entry of size bytes; ok is false for an action without a
// record.
func MemoryKindOf(a snapshot.Action, size int64) (kind uint8, allocSize int64, ok bool) {
	switch a {
	case snapshot.ActionAlloc:
		return MemoryMalloc, size, true
	case snapshot.ActionFreeRequested, snapshot.ActionFree:
		return MemoryFree, -size, true
	case snapshot.ActionFreeCompleted:
		return MemoryBlockFree, -size, true
	}
	return 0, 0, false
}

// TraceActionOf is the entry action of a record of kind; blockFree says
// whether the source records BLOCK_FREE at all (without it a FREE
// completes the free, as the legacy free action does). ok is false for a
// kind that is neither a malloc nor a free.
func TraceActionOf(kind uint8, blockFree bool) (snapshot.Action, bool) {
	switch kind {
	case MemoryMalloc:
		return snapshot.ActionAlloc, true
	case MemoryFree:
		if !blockFree {
			return snapshot.ActionFree, true
		}
		return snapshot.ActionFreeRequested, true
	case MemoryBlockFree:
		return snapshot.ActionFreeCompleted, true
	}
	return 0, false
}

// MemoryUsageFromTrace is the torch.memory_usage record of entry e on
// device, with the allocator's totals after it, at timeNS on the
// recorder's raw clock, from thread tid of process pid. ok is false for an
// action without a record.
func MemoryUsageFromTrace(device int, e *snapshot.TraceEntry, after Totals, timeNS int64, tid, pid uint64) (MemoryUsageRecord, bool) {
	kind, size, ok := MemoryKindOf(e.Action, e.Size)
	if !ok {
		return MemoryUsageRecord{}, false
	}
	return MemoryUsageRecord{Ptr: int64(e.Addr), TimeNS: timeNS, AllocSize: size,
		TotalAllocated: after.Allocated, TotalReserved: after.Reserved, TotalActive: after.Active,
		StreamPtr: int64(e.Stream), DeviceType: DeviceTypeNPU, DeviceIndex: int8(device),
		Component: ComponentCaching, DataType: kind, AllocatorType: AllocatorInner, TID: tid, PID: pid}, true
}

// Totals are the allocator's byte totals a memory record states.
type Totals struct{ Allocated, Reserved, Active int64 }

// before is t less the change entry e made (the totals before it).
func (t Totals) before(e *snapshot.TraceEntry) Totals {
	switch e.Action {
	case snapshot.ActionAlloc:
		t.Allocated -= e.Size
		t.Active -= e.Size
	case snapshot.ActionFree:
		t.Allocated += e.Size
		t.Active += e.Size
	case snapshot.ActionFreeRequested:
		t.Allocated += e.Size
	case snapshot.ActionFreeCompleted:
		t.Active += e.Size
	}
	return t
}

// DeviceTrace is one device's memory records as a trace.
type DeviceTrace struct {
	Entries []snapshot.TraceEntry
	Init    Totals   // before the first entry
	After   []Totals // after each entry, as its record states them
	// Complete is false when a record lacks the allocated or active total.
	Complete bool
}

// TraceFromMemory turns the PTA records that carry a pointer into one
// trace per device (index = device; devices up to maxDevice): the inverse
// of MemoryUsageFromTrace. A free's size is its malloc's when the malloc
// is in the records, else its own. The records carry no segments, and
// blocks allocated before the first record are only in the totals.
func TraceFromMemory(recs []MemoryRecord, maxDevice int) []DeviceTrace {
	blockFree := false
	for i := range recs {
		if recs[i].Kind == MemoryBlockFree {
			blockFree = true
			break
		}
	}
	var out []DeviceTrace
	sizes := map[uint64]int64{} // live pointer → allocated size
	for i := range recs {
		m := &recs[i]
		if m.Component != CompPTA || m.Ptr == 0 || m.Device < 0 || m.Device > maxDevice {
			continue
		}
		a, ok := TraceActionOf(m.Kind, blockFree)
		if !ok || (a == snapshot.ActionAlloc && m.AllocSize <= 0) {
			continue
		}
		e := snapshot.TraceEntry{Action: a, Addr: m.Ptr, Stream: uint64(max(m.Stream, 0)), TimeUS: m.TimeNS / 1000}
		switch a {
		case snapshot.ActionAlloc:
			e.Size = m.AllocSize
			sizes[m.Ptr] = m.AllocSize
		case snapshot.ActionFreeRequested:
			e.Size = sizes[m.Ptr]
		default: // the free completes
			e.Size = sizes[m.Ptr]
			delete(sizes, m.Ptr)
		}
		if e.Size == 0 && m.AllocSize < 0 {
			e.Size = -m.AllocSize
		}
		for len(out) <= m.Device {
			out = append(out, DeviceTrace{Complete: true})
		}
		t := &out[m.Device]
		after := Totals{Allocated: m.Allocated, Reserved: m.Reserved, Active: m.Active}
		if len(t.After) == 0 {
			t.Init = after.before(&e)
		}
		t.Complete = t.Complete && m.HasAllocated && m.HasActive
		t.After = append(t.After, after)
		t.Entries = append(t.Entries, e)
	}
	return out
}
