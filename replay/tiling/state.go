package tiling

import (
	"cmp"
	"iter"
	"slices"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/addrmap"
)

// State is the mutable segment map: segments by base address and live
// blocks by address. A state thawed from a checkpoint also has a base: the
// checkpoint's sorted blocks, read-only, with blocks holding only what
// changed since and gone the base blocks removed since.
type State struct {
	segs map[uint64]snapshot.Segment // Blocks always nil
	// blocks by address: the undo walk does a lookup and an insert or
	// delete here per entry (addrmap: cheaper than a map for that)
	blocks *addrmap.Map[Block]
	base   []Block
	gone   map[uint64]struct{}
	// baseSegs are the checkpoint's sorted segments while segs is nil (no
	// segment entry applied yet); the common query never copies them.
	baseSegs []snapshot.Segment
	// segsDump is segs as the last Dump sorted them, shared read-only by
	// the checkpoints dumped until a segment changes (segMap clears it).
	segsDump []snapshot.Segment
}

// NewState is an empty segment map.
func NewState() *State {
	return &State{segs: map[uint64]snapshot.Segment{}, blocks: &addrmap.Map[Block]{}}
}

// FromSegments loads segments (with blocks) as a state, keeping only the
// live blocks (FromBlock).
func FromSegments(segs []snapshot.Segment) *State {
	st := &State{segs: make(map[uint64]snapshot.Segment, len(segs)), blocks: &addrmap.Map[Block]{}}
	n := 0
	for i := range segs {
		for j := range segs[i].Blocks {
			if segs[i].Blocks[j].State.Active() {
				n++
			}
		}
	}
	st.blocks.Reserve(n)
	for i := range segs {
		s := segs[i]
		s.Blocks = nil
		st.segs[s.Address] = s
		for j := range segs[i].Blocks {
			if b := &segs[i].Blocks[j]; b.State.Active() {
				st.blocks.Put(b.Address, FromBlock(b))
			}
		}
	}
	return st
}

// Live is the number of live blocks (for a thawed state, those of its
// checkpoint plus those changed since: an upper bound).
func (st *State) Live() int { return st.blocks.Len() + len(st.base) }

// segMap returns segs, building it from baseSegs on first use.
func (st *State) segMap() map[uint64]snapshot.Segment {
	st.segsDump = nil // the caller changes segments
	if st.segs == nil {
		st.segs = make(map[uint64]snapshot.Segment, len(st.baseSegs)+4)
		for _, s := range st.baseSegs {
			st.segs[s.Address] = s
		}
		st.baseSegs = nil
	}
	return st.segs
}

// Block returns the live block at addr.
func (st *State) Block(addr uint64) (Block, bool) {
	if b := st.blocks.Ptr(addr); b != nil {
		return *b, true
	}
	if st.base == nil {
		return Block{}, false
	}
	if _, ok := st.gone[addr]; ok {
		return Block{}, false
	}
	i, ok := slices.BinarySearchFunc(st.base, addr, func(b Block, a uint64) int { return cmp.Compare(b.Addr, a) })
	if !ok {
		return Block{}, false
	}
	return st.base[i], true
}

// SetBlock puts b at its address.
func (st *State) SetBlock(b Block) {
	st.blocks.Put(b.Addr, b)
	if st.base != nil {
		delete(st.gone, b.Addr)
	}
}

// DelBlock removes the live block at addr.
func (st *State) DelBlock(addr uint64) {
	st.blocks.Delete(addr)
	if st.base != nil {
		st.gone[addr] = struct{}{}
	}
}

// Blocks yields the live blocks, in no particular order.
func (st *State) Blocks() iter.Seq[Block] {
	return func(yield func(Block) bool) {
		for _, b := range st.base {
			if _, ok := st.gone[b.Addr]; ok {
				continue
			}
			if st.blocks.Ptr(b.Addr) != nil {
				continue
			}
			if !yield(b) {
				return
			}
		}
		for _, b := range st.blocks.All() {
			if !yield(*b) {
				return
			}
		}
	}
}

// Segments yields the segments (Blocks nil), in no particular order.
func (st *State) Segments() iter.Seq[snapshot.Segment] {
	return func(yield func(snapshot.Segment) bool) {
		if st.segs == nil {
			for _, s := range st.baseSegs {
				if !yield(s) {
					return
				}
			}
			return
		}
		for _, s := range st.segs {
			if !yield(s) {
				return
			}
		}
	}
}

// Overrides carry final-state attributes for objects that survive to the
// end of a capture: the trace only knows requested sizes, the final
// segments know rounded block sizes and segment kinds. Keyed by entry
// sequence number.
type Overrides struct {
	Blocks map[int64]Block
	Segs   map[int64]snapshot.Segment
	// Round is the block size of a request that does not survive
	// (replay.SizeRounder of the capture); nil keeps the requested size.
	Round func(int64) int64
	// Sizes, if set, gives the block size a live producer sent for the
	// alloc at seq (0: none, the block keeps its requested size): a
	// per-entry table costs a live log far less than Blocks would.
	Sizes func(seq int64) int64
}

// NewOverrides is an empty set of overrides.
func NewOverrides() Overrides {
	return Overrides{Blocks: map[int64]Block{}, Segs: map[int64]snapshot.Segment{}}
}

// blockSize is the size a block for a request of n bytes gets.
func (ov *Overrides) blockSize(n int64) int64 {
	if ov == nil || ov.Round == nil {
		return n
	}
	return ov.Round(n)
}

// estimates reports whether blockSize rounds (its sizes are estimates).
func (ov *Overrides) estimates() bool { return ov != nil && ov.Round != nil }

// Apply rolls the state forward over one entry (sequence seq) and returns
// the change in pending-free bytes (allocated = active − pending). It is
// the inverse of Undo.
func (st *State) Apply(e *Entry, seq int64, device int, ov *Overrides) (pendingDelta int64) {
	switch e.Action {
	case snapshot.ActionAlloc:
		b := Block{Addr: e.Addr, Size: ov.blockSize(e.Size), Req: e.Size, Frames: e.Frames, State: snapshot.StateActiveAllocated}
		b.Est = ov.estimates()
		if ov != nil {
			if o, ok := ov.Blocks[seq]; ok {
				b = o
				b.State = snapshot.StateActiveAllocated
				if b.Frames == snapshot.NoStack {
					b.Frames = e.Frames
				}
			} else if ov.Sizes != nil {
				if bs := ov.Sizes(seq); bs > 0 {
					b.Size, b.Est = bs, false
				}
			}
		}
		b.Born = seq
		st.SetBlock(b)
	case snapshot.ActionFreeRequested:
		b, ok := st.Block(e.Addr)
		if !ok {
			b = Block{Addr: e.Addr, Size: ov.blockSize(e.Size), Req: e.Size, Frames: e.Frames, Est: ov.estimates(), Born: seq}
		} else if b.State == snapshot.StateActivePendingFree {
			return 0
		}
		b.State = snapshot.StateActivePendingFree
		st.SetBlock(b)
		return e.Size
	case snapshot.ActionFreeCompleted, snapshot.ActionFree:
		if b, ok := st.Block(e.Addr); ok {
			st.DelBlock(e.Addr)
			if b.State == snapshot.StateActivePendingFree {
				return -e.Size
			}
		}
	case snapshot.ActionSegmentAlloc:
		s := NewSegment(e, device, false)
		if ov != nil {
			if o, ok := ov.Segs[seq]; ok {
				s = o
				s.TotalSize = e.Size
			}
		}
		st.segMap()[e.Addr] = s
	case snapshot.ActionSegmentFree:
		delete(st.segMap(), e.Addr)
	case snapshot.ActionSegmentMap:
		st.MapRange(e, device)
	case snapshot.ActionSegmentUnmap:
		st.UnmapRange(e.Addr, e.Size)
	}
	return 0
}

// Undo reverts one entry of a capture's trace
// (docs/reference/snapshot-format.md §6.5): the inverse of Apply. It reads
// the TraceEntry in place (only the fields an action needs: the backwards
// walk touches every entry). A block a free re-creates gets
// round(requested) as its size and is marked Est. Entries that do not fit
// the state (a free of an address with no segment, an unmap of nothing)
// are undone as far as they can be and never fail.
func (st *State) Undo(e *snapshot.TraceEntry, device int, round func(int64) int64) {
	switch e.Action {
	case snapshot.ActionAlloc:
		st.DelBlock(e.Addr)
	case snapshot.ActionFreeCompleted:
		st.recreate(e, snapshot.StateActivePendingFree, round)
	case snapshot.ActionFreeRequested:
		if b, ok := st.Block(e.Addr); ok {
			b.State = snapshot.StateActiveAllocated
			st.SetBlock(b)
		} else {
			st.recreate(e, snapshot.StateActiveAllocated, round)
		}
	case snapshot.ActionFree:
		st.recreate(e, snapshot.StateActiveAllocated, round)
	case snapshot.ActionSegmentAlloc:
		delete(st.segMap(), e.Addr)
	case snapshot.ActionSegmentFree:
		x := EntryOf(e)
		st.segMap()[e.Addr] = NewSegment(&x, device, false)
	case snapshot.ActionSegmentMap:
		st.UnmapRange(e.Addr, e.Size)
	case snapshot.ActionSegmentUnmap:
		x := EntryOf(e)
		st.MapRange(&x, device)
	}
}

// recreate puts back the live block a free entry describes, its size
// round(requested).
func (st *State) recreate(e *snapshot.TraceEntry, state snapshot.BlockState, round func(int64) int64) {
	size := e.Size
	if round != nil {
		size = round(e.Size)
	}
	st.SetBlock(Block{Addr: e.Addr, Size: size, Req: e.Size, State: state, Frames: e.Frames, Est: true, Born: -1})
}

// MapRange adds [e.Addr, e.Addr+e.Size) as expandable memory, merged with
// adjacent segments on the same stream: forward of segment_map, backward
// of segment_unmap. An empty or negative range changes nothing.
func (st *State) MapRange(e *Entry, device int) {
	if e.Size <= 0 || e.Addr+uint64(e.Size) <= e.Addr {
		return
	}
	s := NewSegment(e, device, true)
	segs := st.segMap()
	for base, n := range segs {
		if n.Stream == s.Stream && n.End() == s.Address {
			delete(segs, base)
			n.TotalSize += s.TotalSize
			s = n
			break
		}
	}
	if n, ok := segs[s.End()]; ok && n.Stream == s.Stream {
		delete(segs, n.Address)
		s.TotalSize += n.TotalSize
	}
	segs[s.Address] = s
}

// UnmapRange removes [addr, addr+size) from the segment containing addr:
// shrink it from either end, split it, or remove it. Forward of
// segment_unmap, backward of segment_map. An empty or negative range
// changes nothing.
func (st *State) UnmapRange(addr uint64, size int64) {
	end := addr + uint64(size)
	if size <= 0 || end <= addr {
		return
	}
	segs := st.segMap()
	for base, s := range segs {
		if addr < s.Address || addr >= s.End() {
			continue
		}
		sEnd := s.End()
		delete(segs, base)
		if addr > s.Address {
			head := s
			head.TotalSize = int64(addr - s.Address)
			segs[head.Address] = head
		}
		if end < sEnd {
			tail := s
			tail.Address = end
			tail.TotalSize = int64(sEnd - end)
			segs[end] = tail
		}
		return
	}
}
