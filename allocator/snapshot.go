package allocator

import (
	"cmp"
	"slices"

	"github.com/npumon/npumon/allocator/snapshot"
)

// Snapshot returns the allocator state in the torch snapshot model: the
// segments (one per device allocation, or per contiguous mapped range of an
// expandable segment) sorted by address with their blocks, this device's
// trace (oldest first, ending with the snapshot entry when history is on)
// with epoch-µs times, the stack table and the settings.
func (a *Allocator) Snapshot() *snapshot.Snapshot {
	conv := a.clk.converter() // calibrate outside the lock
	a.lock()
	defer a.mu.Unlock()
	return a.snapshotLocked(conv)
}

// SnapshotAndTrack takes a snapshot and attaches a tracker atomically: fn
// sees exactly the entries recorded after the snapshot's state (not its
// snapshot entry), so a live view can start from the snapshot without a gap
// or a duplicate. See AttachTracker for the tracker contract.
func (a *Allocator) SnapshotAndTrack(fn func(device int, e snapshot.TraceEntry), opts ...TrackerOption) (*snapshot.Snapshot, func()) {
	conv := a.clk.converter()
	t := a.newTracker(fn, opts)
	a.lock()
	s := a.snapshotLocked(conv)
	a.trackers = append(a.trackers, t)
	a.syncFastRecord()
	a.mu.Unlock()
	return s, a.detacher(t)
}

func (a *Allocator) snapshotLocked(conv converter) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Settings: a.cfg.Settings()}
	var totalActive int64
	seen := func(b *block) bool { return b.prev != nil && b.prev.mapped }
	addSegment := func(head *block) {
		seg := snapshot.Segment{
			Device: a.device, Address: head.ptr, Stream: uint64(head.stream),
			IsLarge: !head.pool.small, IsExpandable: head.expandable != nil,
			HasPoolID: true, // segment_pool_id (0, 0): the default pool
			Frames:    head.segFrames,
		}
		for b := head; b != nil && b.mapped; b = b.next {
			blk := snapshot.Block{Address: b.ptr, Size: b.size, State: snapshot.StateInactive}
			seg.TotalSize += b.size
			switch {
			case b.allocated:
				blk.State = snapshot.StateActiveAllocated
				seg.AllocatedSize += b.size
			case b.eventCount > 0:
				blk.State = snapshot.StateActivePendingFree
			}
			if blk.State.Active() {
				blk.RequestedSize = b.requested
				blk.Frames = b.frames
				seg.ActiveSize += b.size
				seg.RequestedSize += b.requested
			}
			seg.Blocks = append(seg.Blocks, blk)
		}
		totalActive += seg.ActiveSize
		s.Segments = append(s.Segments, seg)
	}
	for _, pool := range []*blockPool{&a.large, &a.small} {
		for b := range pool.freeBlocks() {
			if !seen(b) {
				addSegment(b)
			}
		}
	}
	a.active.each(func(b *block) {
		if !seen(b) {
			addSegment(b)
		}
	})
	slices.SortFunc(s.Segments, func(x, y snapshot.Segment) int { return cmp.Compare(x.Address, y.Address) })
	a.record(snapshot.ActionSnapshot, 0, totalActive, 0, snapshot.NoStack)

	s.DeviceTraces = make([][]snapshot.TraceEntry, a.device+1)
	n, raw := a.ring.entries()
	if !a.history {
		n, raw = 0, func(func(rawEntry) bool) {}
	}
	tr := make([]snapshot.TraceEntry, n)
	var last int64
	i := 0
	for e := range raw {
		tr[i] = a.convert(e, conv)
		// Ticks from different cores may disagree by a few cycles; keep the
		// trace's times non-decreasing as torch's are.
		if tr[i].TimeUS < last {
			tr[i].TimeUS = last
		}
		last = tr[i].TimeUS
		i++
	}
	s.DeviceTraces[a.device] = tr
	a.stackMu.RLock()
	s.Stacks = slices.Clip(a.stacks.Stacks())
	a.stackMu.RUnlock()
	return s
}

// Stats returns the memory statistics (torch memory_stats()).
func (a *Allocator) Stats() Stats {
	a.lock()
	defer a.mu.Unlock()
	return a.stats
}

// ResetPeakStats sets every peak to its current value.
func (a *Allocator) ResetPeakStats() {
	a.lock()
	defer a.mu.Unlock()
	a.stats.resetPeak()
}

// ResetAccumulatedStats zeroes the allocated/freed totals and counters.
func (a *Allocator) ResetAccumulatedStats() {
	a.lock()
	defer a.mu.Unlock()
	a.stats.resetAccumulated()
}

// Summary renders Stats as a memory_summary()-style table.
func (a *Allocator) Summary() string {
	return summaryText(a.Stats(), a.device, a.flavour)
}
