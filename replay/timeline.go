package replay

import (
	"fmt"
	"sort"

	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
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

// LiveSize is the size a live final-state block counts for in the active
// series: its requested size, else its first history record's real size,
// else its block size.
func LiveSize(b *snapshot.Block) int64 {
	if b.RequestedSize > 0 {
		return b.RequestedSize
	}
	if len(b.History) > 0 && b.History[0].RealSize > 0 {
		return b.History[0].RealSize
	}
	return b.Size
}

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
	st := newUndoState(t.final, t.round)
	for j := len(t.Entries) - 1; j > i; j-- {
		st.undo(&t.Entries[j], t.Device)
	}
	return st.materialize()
}

// undoState is the mutable state of the backwards walk: segments by base
// address and live (active) blocks by address. Inactive blocks are not kept;
// they are the gaps, re-tiled by materialize.
type undoState struct {
	segs   map[uint64]*snapshot.Segment
	blocks map[uint64]*undoBlock
	round  func(int64) int64
}

// undoBlock is a live block of the backwards walk; est marks one re-created
// from an entry (its size round(requested), not a recorded size).
type undoBlock struct {
	snapshot.Block
	est bool
}

func newUndoState(final []snapshot.Segment, round func(int64) int64) *undoState {
	st := &undoState{
		segs:   make(map[uint64]*snapshot.Segment, len(final)),
		blocks: make(map[uint64]*undoBlock),
		round:  round,
	}
	for i := range final {
		s := final[i]
		s.Blocks = nil
		st.segs[s.Address] = &s
		for j := range final[i].Blocks {
			if b := final[i].Blocks[j]; b.State.Active() {
				st.blocks[b.Address] = &undoBlock{Block: b}
			}
		}
	}
	return st
}

// smallSegmentMax is the largest segment size re-created segments are
// labelled "small" at: the small pool allocates 2 MiB segments.
const smallSegmentMax = 2 << 20

// undo reverts one entry (docs/reference/snapshot-format.md §6.5). Entries that
// do not fit the state (a free of an address with no segment, an unmap of
// nothing) are applied as far as they can be and never fail.
func (st *undoState) undo(e *snapshot.TraceEntry, device int) {
	switch e.Action {
	case snapshot.ActionAlloc:
		delete(st.blocks, e.Addr)
	case snapshot.ActionFreeCompleted:
		st.recreate(e, snapshot.StateActivePendingFree)
	case snapshot.ActionFreeRequested:
		if b, ok := st.blocks[e.Addr]; ok {
			b.State = snapshot.StateActiveAllocated
		} else {
			st.recreate(e, snapshot.StateActiveAllocated)
		}
	case snapshot.ActionFree:
		st.recreate(e, snapshot.StateActiveAllocated)
	case snapshot.ActionSegmentAlloc:
		delete(st.segs, e.Addr)
	case snapshot.ActionSegmentFree:
		st.segs[e.Addr] = st.newSegment(e, device, false)
	case snapshot.ActionSegmentMap:
		st.cut(e.Addr, e.Size)
	case snapshot.ActionSegmentUnmap:
		st.remap(e, device)
	}
}

// recreate puts back the live block a free entry describes, its size
// round(requested).
func (st *undoState) recreate(e *snapshot.TraceEntry, state snapshot.BlockState) {
	st.blocks[e.Addr] = &undoBlock{Block: snapshot.Block{Address: e.Addr, Size: st.round(e.Size), RequestedSize: e.Size,
		State: state, Frames: e.Frames}, est: true}
}

// entryBlock is the live block a free entry describes, re-created in state
// with the requested size as both sizes (callers that know the rounding
// replace Size).
func entryBlock(e *snapshot.TraceEntry, state snapshot.BlockState) *snapshot.Block {
	return &snapshot.Block{Address: e.Addr, Size: e.Size, RequestedSize: e.Size, State: state, Frames: e.Frames}
}

func (st *undoState) newSegment(e *snapshot.TraceEntry, device int, expandable bool) *snapshot.Segment {
	return &snapshot.Segment{
		Device: device, Address: e.Addr, TotalSize: e.Size, Stream: e.Stream,
		IsLarge: e.Size > smallSegmentMax, PoolID: e.PoolID, HasPoolID: e.HasPoolID,
		IsExpandable: expandable, Frames: e.Frames,
	}
}

// cut removes [addr, addr+size) from the segment containing it, shrinking
// it from either end, splitting it, or removing it entirely.
func (st *undoState) cut(addr uint64, size int64) {
	end := addr + uint64(size)
	for base, s := range st.segs {
		if addr < s.Address || addr >= s.End() {
			continue
		}
		sEnd := s.End()
		switch {
		case addr == s.Address && end >= sEnd:
			delete(st.segs, base)
		case addr == s.Address:
			delete(st.segs, base)
			s.Address = end
			s.TotalSize = int64(sEnd - end)
			st.segs[end] = s
		case end >= sEnd:
			s.TotalSize = int64(addr - s.Address)
		default:
			tail := *s
			tail.Address = end
			tail.TotalSize = int64(sEnd - end)
			s.TotalSize = int64(addr - s.Address)
			st.segs[end] = &tail
		}
		return
	}
}

// remap re-inserts an unmapped range as an expandable segment, merged with
// adjacent segments on the same stream.
func (st *undoState) remap(e *snapshot.TraceEntry, device int) {
	s := st.newSegment(e, device, true)
	for base, n := range st.segs {
		if n.Stream == s.Stream && n.End() == s.Address {
			delete(st.segs, base)
			n.TotalSize += s.TotalSize
			s = n
			break
		}
	}
	if n, ok := st.segs[s.End()]; ok && n.Stream == s.Stream && s.End() != s.Address {
		delete(st.segs, n.Address)
		s.TotalSize += n.TotalSize
	}
	st.segs[s.Address] = s
}

// materialize returns the segments sorted by address, each tiled by its
// live blocks and inactive blocks filling the gaps. Live blocks outside
// every segment are dropped. It also returns how many of the placed live
// blocks were re-created from an entry (sizes round(requested)).
func (st *undoState) materialize() ([]snapshot.Segment, int) {
	est := 0
	segs := make([]snapshot.Segment, 0, len(st.segs))
	for _, s := range st.segs {
		segs = append(segs, *s)
	}
	sort.Slice(segs, func(a, b int) bool { return segs[a].Address < segs[b].Address })
	blocks := make([]*undoBlock, 0, len(st.blocks))
	for _, b := range st.blocks {
		blocks = append(blocks, b)
	}
	sort.Slice(blocks, func(a, b int) bool { return blocks[a].Address < blocks[b].Address })

	bi := 0
	for si := range segs {
		s := &segs[si]
		s.AllocatedSize, s.ActiveSize, s.RequestedSize = 0, 0, 0
		for bi < len(blocks) && blocks[bi].Address < s.Address {
			bi++ // outside every segment
		}
		cur, end := s.Address, s.End()
		for bi < len(blocks) && blocks[bi].Address < end {
			b := blocks[bi].Block
			if blocks[bi].est {
				est++
			}
			bi++
			if b.Address > cur {
				s.Blocks = append(s.Blocks, snapshot.Block{Address: cur, Size: int64(b.Address - cur)})
			}
			s.Blocks = append(s.Blocks, b)
			s.ActiveSize += b.Size
			s.RequestedSize += b.RequestedSize
			if b.State == snapshot.StateActiveAllocated {
				s.AllocatedSize += b.Size
			}
			if bEnd := b.Address + uint64(b.Size); bEnd > cur {
				cur = bEnd
			}
		}
		if cur < end {
			s.Blocks = append(s.Blocks, snapshot.Block{Address: cur, Size: int64(end - cur)})
		}
	}
	return segs, est
}

// BlockFrames is the stack a block was allocated from: its frames (torch
// 2.1+, torch_npu), else the frames of its first history record (torch
// 1.13 / 2.0 files, as PyTorch's viewer reads them).
func BlockFrames(b *snapshot.Block) snapshot.StackID {
	if b.Frames != snapshot.NoStack {
		return b.Frames
	}
	for _, h := range b.History {
		if h.Frames != snapshot.NoStack {
			return h.Frames
		}
	}
	return snapshot.NoStack
}

// StatesAfter is StateAfter for several entries in one backward walk:
// out[k] is the state right after entry idx[k]. idx must be ascending.
func (t *Timeline) StatesAfter(idx []int) [][]snapshot.Segment {
	out := make([][]snapshot.Segment, len(idx))
	st := newUndoState(t.final, t.round)
	j := len(t.Entries) - 1
	for k := len(idx) - 1; k >= 0; k-- {
		i := max(idx[k], -1)
		for ; j > i; j-- {
			st.undo(&t.Entries[j], t.Device)
		}
		out[k], _ = st.materialize()
	}
	return out
}
