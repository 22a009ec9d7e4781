package main

import (
	"context"
	"fmt"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/tui"
)

// profilerLoader reads a torch_npu profiler directory into store: its ops
// (with memory deltas) and, when the directory has raw FRAMEWORK memory
// records, a per-device trace made from them. Analysed (CSV) output has
// only totals, so only its ops are shown.
func profilerLoader(path string, store *monitor.Store) func(context.Context, func(tui.Progress)) error {
	return func(ctx context.Context, report func(tui.Progress)) error {
		done := make(chan error, 1)
		go func() {
			report(tui.Progress{Stage: "reading profiler data"})
			d, err := profiler.ReadDir(path)
			if err != nil {
				done <- err
				return
			}
			snap := profilerTrace(d)
			var n int64
			for _, tr := range snap.DeviceTraces {
				n += int64(len(tr))
			}
			report(tui.Progress{Stage: "indexing", EntriesTotal: n})
			if n > 0 {
				if err := store.IngestSnapshot(snap); err != nil {
					done <- fmt.Errorf("%s: %w", path, err)
					return
				}
			}
			store.IngestOps(profilerOps(d))
			done <- nil
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// profilerOps converts timed profiler ops to the Store's ops.
func profilerOps(d *profiler.Data) []monitor.Op {
	deltas := d.OpMemDeltas()
	ops := make([]monitor.Op, 0, len(d.Ops))
	for i := range d.Ops {
		o := &d.Ops[i]
		if !o.Timed() {
			continue
		}
		ops = append(ops, monitor.Op{Name: o.Name, StartUS: o.StartUS(), EndUS: o.EndUS(), Thread: o.TID,
			Seq: o.Seq, Device: -1, MemDelta: deltas[i], Step: o.Step, IsStep: o.IsStep, InputDims: o.InputShapes})
	}
	return ops
}

// profilerTrace turns the PTA memory records that carry a pointer into
// trace entries: MALLOC → alloc, FREE → free_requested and BLOCK_FREE →
// free_completed (or FREE → free when the source records no BLOCK_FREE).
// The records carry no segments, so the segment map stays empty.
func profilerTrace(d *profiler.Data) *allocator.Snapshot {
	blockFree := false
	for i := range d.Memory {
		if d.Memory[i].Kind == profiler.MemoryBlockFree {
			blockFree = true
			break
		}
	}
	snap := &allocator.Snapshot{Stacks: []allocator.Stack{nil}}
	sizes := map[uint64]int64{} // live pointer → allocated size
	for i := range d.Memory {
		m := &d.Memory[i]
		if m.Component != profiler.CompPTA || m.Ptr == 0 || m.Device < 0 || m.Device > 1024 {
			continue
		}
		e := allocator.TraceEntry{Addr: m.Ptr, Stream: uint64(max(m.Stream, 0)), TimeUS: m.TimeNS / 1000}
		switch {
		case m.Kind == profiler.MemoryMalloc && m.AllocSize > 0:
			e.Action, e.Size = allocator.ActionAlloc, m.AllocSize
			sizes[m.Ptr] = m.AllocSize
		case m.Kind == profiler.MemoryFree:
			e.Action, e.Size = allocator.ActionFreeRequested, sizes[m.Ptr]
			if !blockFree {
				e.Action = allocator.ActionFree
				delete(sizes, m.Ptr)
			}
		case m.Kind == profiler.MemoryBlockFree:
			e.Action, e.Size = allocator.ActionFreeCompleted, sizes[m.Ptr]
			delete(sizes, m.Ptr)
		default:
			continue
		}
		if e.Size == 0 && m.AllocSize < 0 {
			e.Size = -m.AllocSize
		}
		for len(snap.DeviceTraces) <= m.Device {
			snap.DeviceTraces = append(snap.DeviceTraces, nil)
		}
		snap.DeviceTraces[m.Device] = append(snap.DeviceTraces[m.Device], e)
	}
	return snap
}
