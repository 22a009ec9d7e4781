package replay

import (
	"fmt"

	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/tiling"
)

// Timeline is one device's trace read per docs/timeline.md.
type Timeline struct {
	Device  int
	Entries []snapshot.TraceEntry // the device trace, read-only, shared with the snapshot
	// Initial is the state before entry 0: the device's segments with their
	// blocks (active_allocated / active_pending_free / inactive tiling each
	// segment), reconstructed from the final state by undoing every entry
	// (docs/reference/snapshot-format.md §6.5).
	Initial         []snapshot.Segment
	ActiveAtStart   int64 // Σ initially-active sizes (timeline rules (a)+(b))
	ReservedAtStart int64
	// Forward maps an entry index to its forward traceback (the
	// snapshot's Forward side table for this device; nil when none).
	Forward map[int]snapshot.StackID

	final []snapshot.Segment // the device's final segments, shared with the snapshot
	start []StartAlloc       // live allocations before entry 0 (traceAcc.liveAtStart)
	round func(int64) int64  // block size of a request (SizeRounder)
}

// SizeRounder returns the block size the snapshot's allocator gives a
// request: round_size with the file's roundup_power2_divisions and, for a
// torch_npu dump, the 32-byte pad. Blocks the trace re-creates (it records
// requested sizes only) get this size; it is exact unless the allocator
// left a free block unsplit (docs/timeline.md).
func SizeRounder(s *snapshot.Snapshot) func(int64) int64 {
	f := config.FlavourCUDA
	if s != nil && s.TorchNPU {
		f = config.FlavourNPU
	}
	var st *snapshot.Settings
	if s != nil {
		st = s.Settings
	}
	cfg := config.ConfigFromSettings(st, f)
	return func(n int64) int64 {
		if n <= 0 {
			return n
		}
		return cfg.RoundSize(n)
	}
}

// Round is the block size the timeline gives a request of n bytes
// (SizeRounder of its snapshot).
func (t *Timeline) Round(n int64) int64 { return t.round(n) }

// NewTimeline reads device's trace and final segments out of s. It fails only
// for a device the snapshot does not mention.
func NewTimeline(s *snapshot.Snapshot, device int) (*Timeline, error) {
	return newTimeline(s, device, true)
}

// NewTimelineWithoutInitial is NewTimeline leaving Initial nil, for callers
// that need only the entries and the series' start values: it skips the
// O(n) undo walk Initial takes.
func NewTimelineWithoutInitial(s *snapshot.Snapshot, device int) (*Timeline, error) {
	return newTimeline(s, device, false)
}

// newTimeline builds a Timeline; Initial (an O(n) undo walk) only when asked.
func newTimeline(s *snapshot.Snapshot, device int, withInitial bool) (*Timeline, error) {
	if s == nil {
		return nil, fmt.Errorf("timeline: no snapshot")
	}
	var entries []snapshot.TraceEntry
	if device >= 0 && device < len(s.DeviceTraces) {
		entries = s.DeviceTraces[device]
	}
	final := deviceSegments(s, device)
	if len(entries) == 0 && len(final) == 0 {
		return nil, fmt.Errorf("timeline: device %d has no segments and no trace in this snapshot", device)
	}

	// One accumulator implements the start rules for stats and timelines.
	acc := newTraceAcc()
	for i := range entries {
		acc.add(&entries[i])
	}
	t := timelineOf(device, entries, final, acc, SizeRounder(s))
	if device >= 0 && device < len(s.Forward) {
		t.Forward = s.Forward[device]
	}
	if withInitial {
		t.Initial = t.StateAfter(-1)
	}
	return t, nil
}

// timelineOf is the Timeline (without Initial) of a trace acc has folded.
func timelineOf(device int, entries []snapshot.TraceEntry, final []snapshot.Segment, acc *traceAcc, round func(int64) int64) *Timeline {
	t := &Timeline{Device: device, Entries: entries, final: final, start: acc.liveAtStart(final, round), round: round}
	var reserved int64
	for i := range final {
		reserved += final[i].TotalSize
	}
	t.ReservedAtStart = reserved - acc.reserved
	t.ActiveAtStart = sumLive(t.start)
	return t
}

// Start returns the allocations live before entry 0 (timeline rules (a)
// and (b)) in address order; the slice is shared, read-only.
func (t *Timeline) Start() []StartAlloc { return t.start }

// ActiveDelta is the change entry e makes to the active series: +size at
// alloc, −size at free_completed and legacy free, 0 otherwise.
func ActiveDelta(e *snapshot.TraceEntry) int64 {
	switch e.Action {
	case snapshot.ActionAlloc:
		return e.Size
	case snapshot.ActionFreeCompleted, snapshot.ActionFree:
		return -e.Size
	}
	return 0
}

// ReservedDelta is the change entry e makes to the reserved series: +size
// at segment_alloc / segment_map, −size at segment_free / segment_unmap.
func ReservedDelta(e *snapshot.TraceEntry) int64 {
	switch e.Action {
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		return e.Size
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		return -e.Size
	}
	return 0
}

// ActiveSeries returns the active bytes right after each entry.
func (t *Timeline) ActiveSeries() []int64 {
	out := make([]int64, len(t.Entries))
	v := t.ActiveAtStart
	for i := range t.Entries {
		v += ActiveDelta(&t.Entries[i])
		out[i] = v
	}
	return out
}

// LiveAfter returns the number of live allocations and their Σ size right
// after entry i (i = -1: before entry 0), as the active series counts them.
func (t *Timeline) LiveAfter(i int) (count int, bytes int64) {
	if i >= len(t.Entries) {
		i = len(t.Entries) - 1
	}
	live := make(map[uint64]int64, len(t.start))
	for i := range t.start {
		live[t.start[i].Block.Address] += t.start[i].Size()
	}
	for j := 0; j <= i; j++ {
		e := &t.Entries[j]
		switch e.Action {
		case snapshot.ActionAlloc:
			live[e.Addr] += e.Size
		case snapshot.ActionFreeCompleted, snapshot.ActionFree:
			if v := live[e.Addr] - e.Size; v != 0 {
				live[e.Addr] = v
			} else {
				delete(live, e.Addr)
			}
		}
	}
	for _, v := range live {
		bytes += v
	}
	return len(live), bytes
}

// StateAfter returns the segments (with blocks) right after entry i
// (i = -1: Initial), by undoing later entries from the final state. O(n) —
// for stats --at-index and as the oracle in tests. The result is a fresh
// copy the caller owns.
func (t *Timeline) StateAfter(i int) []snapshot.Segment {
	segs, _ := t.StateAfterEstimated(i)
	return segs
}

// StateAfterEstimated is StateAfter plus the number of live blocks in the
// segments whose size is round_size of the requested size (the trace
// re-created them) rather than a block size the file records.
func (t *Timeline) StateAfterEstimated(i int) ([]snapshot.Segment, int) {
	if i < -1 {
		i = -1
	}
	st := tiling.FromSegments(t.final)
	for j := len(t.Entries) - 1; j > i; j-- {
		st.Undo(&t.Entries[j], t.Device, t.round)
	}
	return t.materialize(st)
}

// materialize tiles a state of the backwards walk (tiling.Build); live
// blocks that come from the final state keep the file's block as it is
// (history included), in their current state.
func (t *Timeline) materialize(st *tiling.State) ([]snapshot.Segment, int) {
	cp := st.Freeze(0)
	var restore func(*tiling.Block, *snapshot.Block)
	if orig := t.legacyBlocks(); len(orig) > 0 {
		restore = func(b *tiling.Block, out *snapshot.Block) {
			if o := orig[b.Addr]; o != nil && !b.Est {
				state := out.State
				*out = *o
				out.State = state
			}
		}
	}
	tl := tiling.Build(t.Device, cp.Segs, cp.Blocks, restore)
	return tl.Segments, tl.Estimated
}

// legacyBlocks are the final live blocks that carry a history (torch
// 1.13 / 2.0 files), by address: what tiling.Block does not keep.
func (t *Timeline) legacyBlocks() map[uint64]*snapshot.Block {
	var out map[uint64]*snapshot.Block
	for i := range t.final {
		for j := range t.final[i].Blocks {
			if b := &t.final[i].Blocks[j]; b.State.Active() && len(b.History) > 0 {
				if out == nil {
					out = map[uint64]*snapshot.Block{}
				}
				out[b.Address] = b
			}
		}
	}
	return out
}

// entryBlock is the live block a free entry describes, re-created in state
// with the requested size as both sizes (callers that know the rounding
// replace Size).
func entryBlock(e *snapshot.TraceEntry, state snapshot.BlockState) *snapshot.Block {
	return &snapshot.Block{Address: e.Addr, Size: e.Size, RequestedSize: e.Size, State: state, Frames: e.Frames}
}

// StatesAfter is StateAfter for several entries in one backward walk:
// out[k] is the state right after entry idx[k]. idx must be ascending.
func (t *Timeline) StatesAfter(idx []int) [][]snapshot.Segment {
	out := make([][]snapshot.Segment, len(idx))
	st := tiling.FromSegments(t.final)
	j := len(t.Entries) - 1
	for k := len(idx) - 1; k >= 0; k-- {
		i := max(idx[k], -1)
		for ; j > i; j-- {
			st.Undo(&t.Entries[j], t.Device, t.round)
		}
		out[k], _ = t.materialize(st)
	}
	return out
}
