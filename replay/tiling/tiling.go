// Package tiling is the segment map a device trace implies at one position:
// segments by base address, live (active) blocks by address, and inactive
// ranges as the gaps between them. It holds the range operations and the
// tiling once, for both directions of docs/timeline.md:
//
//   - State.Apply rolls one entry forward (the monitor Store's head and its
//     checkpoints);
//   - State.Undo rolls one entry back from a capture's final state
//     (replay's Timeline.StateAfter, docs/reference/snapshot-format.md §6.5);
//   - Build tiles a state into segments and blocks, Measure gives Build's
//     figures without building, FiguresOf reads them off a tiled list.
//
// Apply and Undo are inverses: rolling forward from Timeline.Initial
// reaches the state undoing from the end gives (agree_test.go).
package tiling

import "github.com/npumon/npumon/allocator/snapshot"

// SmallSegmentMax is the largest segment the trace creates that is called
// "small": the small pool allocates 2 MiB segments.
const SmallSegmentMax = 2 << 20

// Block is a live block of the segment map.
type Block struct {
	Addr uint64
	Size int64
	// Req is the requested size; for a final-state block of a file that
	// records none, its first history record's real size (LiveSize).
	Req    int64
	Frames snapshot.StackID
	State  snapshot.BlockState
	// Est marks a block the trace re-created: its Size is round(Req),
	// not a block size the file records.
	Est bool
	// Born is the sequence of the entry that allocated it (forward only);
	// -1: before the log.
	Born int64
}

// Live is what the block counts for in the active series (LiveSize).
func (b *Block) Live() int64 {
	if b.Req > 0 {
		return b.Req
	}
	return b.Size
}

// FromBlock is a final-state (or snapshot) block as a live block, born
// before the log.
func FromBlock(b *snapshot.Block) Block {
	req := b.RequestedSize
	if req <= 0 && len(b.History) > 0 && b.History[0].RealSize > 0 {
		req = b.History[0].RealSize
	}
	return Block{Addr: b.Address, Size: b.Size, Req: req, Frames: BlockFrames(b), State: b.State, Born: -1}
}

// LiveSize is the size a live final-state block counts for in the active
// series: its requested size, else its first history record's real size
// (torch 1.13 / 2.0 files), else its block size.
func LiveSize(b *snapshot.Block) int64 {
	l := Block{Size: b.Size, Req: b.RequestedSize}
	if l.Req <= 0 && len(b.History) > 0 && b.History[0].RealSize > 0 {
		l.Req = b.History[0].RealSize
	}
	return l.Live()
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

// Entry is what rolling the map over one trace entry needs, from a
// TraceEntry (EntryOf) or a record the Store keeps.
type Entry struct {
	Action  snapshot.Action
	Addr    uint64
	Size    int64
	Stream  uint64
	Frames  snapshot.StackID
	Pool    snapshot.PoolID
	HasPool bool
}

// EntryOf is e as an Entry.
func EntryOf(e *snapshot.TraceEntry) Entry {
	return Entry{Action: e.Action, Addr: e.Addr, Size: e.Size, Stream: e.Stream, Frames: e.Frames, Pool: e.PoolID, HasPool: e.HasPoolID}
}

// NewSegment is the segment an entry creates (segment_alloc, or the range
// of a segment_map, expandable).
func NewSegment(e *Entry, device int, expandable bool) snapshot.Segment {
	return snapshot.Segment{
		Device: device, Address: e.Addr, TotalSize: e.Size, Stream: e.Stream,
		IsLarge: e.Size > SmallSegmentMax, PoolID: e.Pool, HasPoolID: e.HasPool,
		IsExpandable: expandable, Frames: e.Frames,
	}
}

// Range is an address range; as a gap, an inactive range of a segment.
type Range struct {
	Address uint64
	Size    int64
}
