package store

import (
	"cmp"
	"slices"
	"sync"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// This file holds the segment map a device log implies at one position: the
// mutable head the Store rolls forward, and the frozen checkpoints it seeks
// from. Entries are applied forward with the inverse of the undo rules in
// docs/timeline.md (docs/reference/snapshot-format.md §6.5), so that rolling
// forward from replay's Timeline.Initial reaches the same state as undoing
// backwards from the final state.

// liveBlock is a live (active) block; inactive ranges are the gaps between them.
type liveBlock struct {
	addr   uint64
	size   int64
	req    int64
	frames snapshot.StackID
	state  snapshot.BlockState
	born   int64 // sequence of the entry that allocated it; -1: before the log
}

// segState is the mutable segment map: segments by base address and live
// blocks by address. A query's state also has a base: the checkpoint's
// sorted blocks, read-only, with blocks holding only what changed since
// and gone the base blocks removed since.
type segState struct {
	segs   map[uint64]snapshot.Segment // Blocks always nil
	blocks map[uint64]liveBlock
	base   []liveBlock
	gone   map[uint64]struct{}
	// baseSegs are the checkpoint's sorted segments while segs is nil (no
	// segment entry applied yet); the common query never copies them.
	baseSegs []snapshot.Segment
}

// segMap returns segs, building it from baseSegs on first use.
func (st *segState) segMap() map[uint64]snapshot.Segment {
	if st.segs == nil {
		st.segs = make(map[uint64]snapshot.Segment, len(st.baseSegs)+4)
		for _, s := range st.baseSegs {
			st.segs[s.Address] = s
		}
		st.baseSegs = nil
	}
	return st.segs
}

func (st *segState) getBlock(addr uint64) (liveBlock, bool) {
	if b, ok := st.blocks[addr]; ok {
		return b, true
	}
	if st.base == nil {
		return liveBlock{}, false
	}
	if _, ok := st.gone[addr]; ok {
		return liveBlock{}, false
	}
	i, ok := slices.BinarySearchFunc(st.base, addr, func(b liveBlock, a uint64) int { return cmp.Compare(b.addr, a) })
	if !ok {
		return liveBlock{}, false
	}
	return st.base[i], true
}

func (st *segState) setBlock(b liveBlock) {
	st.blocks[b.addr] = b
	if st.base != nil {
		delete(st.gone, b.addr)
	}
}

func (st *segState) delBlock(addr uint64) {
	delete(st.blocks, addr)
	if st.base != nil {
		st.gone[addr] = struct{}{}
	}
}

func newSegState() *segState {
	return &segState{segs: map[uint64]snapshot.Segment{}, blocks: map[uint64]liveBlock{}}
}

// checkpoint is a frozen segment map right after `at` entries. Ingest
// leaves it unsorted; the first query that needs it sorts it (once).
type checkpoint struct {
	at     int64
	segs   []snapshot.Segment // Blocks nil
	blocks []liveBlock
	sorted sync.Once
}

func (cp *checkpoint) ensureSorted() { cp.sorted.Do(cp.sort) }

// freeze copies the state into a sorted checkpoint.
func (st *segState) freeze(at int64) *checkpoint {
	cp := st.dump(at)
	if st.base == nil {
		cp.sort()
	} else if st.segs != nil {
		slices.SortFunc(cp.segs, func(a, b snapshot.Segment) int { return cmp.Compare(a.Address, b.Address) })
	}
	cp.sorted.Do(func() {})
	return cp
}

// dump copies the state into a checkpoint; blocks come out unsorted unless
// the state has a base (then base and changes are merged in order).
func (st *segState) dump(at int64) *checkpoint {
	cp := &checkpoint{at: at}
	if st.segs == nil {
		cp.segs = st.baseSegs // sorted, shared read-only
	} else {
		cp.segs = make([]snapshot.Segment, 0, len(st.segs))
		for _, s := range st.segs {
			cp.segs = append(cp.segs, s)
		}
	}
	if st.base == nil {
		cp.blocks = make([]liveBlock, 0, len(st.blocks))
		for _, b := range st.blocks {
			cp.blocks = append(cp.blocks, b)
		}
		return cp
	}
	changed := make([]liveBlock, 0, len(st.blocks))
	for _, b := range st.blocks {
		changed = append(changed, b)
	}
	slices.SortFunc(changed, func(a, b liveBlock) int { return cmp.Compare(a.addr, b.addr) })
	out := make([]liveBlock, 0, len(st.base)+len(changed))
	i, j := 0, 0
	for i < len(st.base) || j < len(changed) {
		switch {
		case j == len(changed) || (i < len(st.base) && st.base[i].addr < changed[j].addr):
			b := st.base[i]
			i++
			if _, ok := st.gone[b.addr]; !ok {
				out = append(out, b)
			}
		case i < len(st.base) && st.base[i].addr == changed[j].addr:
			i++ // replaced by the change
		default:
			out = append(out, changed[j])
			j++
		}
	}
	cp.blocks = out
	return cp
}

func (cp *checkpoint) sort() {
	slices.SortFunc(cp.segs, func(a, b snapshot.Segment) int { return cmp.Compare(a.Address, b.Address) })
	slices.SortFunc(cp.blocks, func(a, b liveBlock) int { return cmp.Compare(a.addr, b.addr) })
}

// thaw returns a mutable state on top of a (sorted) checkpoint: segments
// are copied, blocks stay in the checkpoint and only changes are kept.
func (cp *checkpoint) thaw() *segState {
	cp.ensureSorted()
	st := &segState{blocks: map[uint64]liveBlock{}, base: cp.blocks, gone: map[uint64]struct{}{}, baseSegs: cp.segs}
	if st.base == nil {
		st.base = []liveBlock{}
	}
	return st
}

// entryView is what applying an entry needs, from a TraceEntry or a stored rec.
type entryView struct {
	action snapshot.Action
	addr   uint64
	size   int64
	stream uint64
	frames snapshot.StackID
	pool   snapshot.PoolID
	hasPID bool
}

// overrides carry final-state attributes for objects that survive to the end
// of a capture: the trace only knows requested sizes, the final segments know
// rounded block sizes and segment kinds. Keyed by entry sequence number.
type overrides struct {
	blocks map[int64]liveBlock
	segs   map[int64]snapshot.Segment
	// round is the block size of a request that does not survive
	// (replay.SizeRounder of the capture); nil keeps the requested size.
	round func(int64) int64
}

// blockSize is the size a block for a request of n bytes gets.
func (ov *overrides) blockSize(n int64) int64 {
	if ov == nil || ov.round == nil {
		return n
	}
	return ov.round(n)
}

// apply rolls the state forward over one entry (sequence seq) and returns the
// change in pending-free bytes (allocated = active − pending).
func (st *segState) apply(e *entryView, seq int64, device int, ov *overrides) (pendingDelta int64) {
	switch e.action {
	case snapshot.ActionAlloc:
		b := liveBlock{addr: e.addr, size: ov.blockSize(e.size), req: e.size, frames: e.frames, state: snapshot.StateActiveAllocated}
		if ov != nil {
			if o, ok := ov.blocks[seq]; ok {
				b = o
				b.state = snapshot.StateActiveAllocated
				if b.frames == snapshot.NoStack {
					b.frames = e.frames
				}
			}
		}
		b.born = seq
		st.setBlock(b)
	case snapshot.ActionFreeRequested:
		b, ok := st.getBlock(e.addr)
		if !ok {
			b = liveBlock{addr: e.addr, size: ov.blockSize(e.size), req: e.size, frames: e.frames, born: seq}
		} else if b.state == snapshot.StateActivePendingFree {
			return 0
		}
		b.state = snapshot.StateActivePendingFree
		st.setBlock(b)
		return e.size
	case snapshot.ActionFreeCompleted, snapshot.ActionFree:
		if b, ok := st.getBlock(e.addr); ok {
			st.delBlock(e.addr)
			if b.state == snapshot.StateActivePendingFree {
				return -e.size
			}
		}
	case snapshot.ActionSegmentAlloc:
		s := newSegment(e, device, false)
		if ov != nil {
			if o, ok := ov.segs[seq]; ok {
				s = o
				s.TotalSize = e.size
			}
		}
		st.segMap()[e.addr] = s
	case snapshot.ActionSegmentFree:
		delete(st.segMap(), e.addr)
	case snapshot.ActionSegmentMap:
		st.mapRange(e, device)
	case snapshot.ActionSegmentUnmap:
		st.unmapRange(e.addr, e.size)
	}
	return 0
}

// smallSegmentMax is the largest segment created by the trace that is called
// "small": the small pool allocates 2 MiB segments.
const smallSegmentMax = 2 << 20

func newSegment(e *entryView, device int, expandable bool) snapshot.Segment {
	return snapshot.Segment{
		Device: device, Address: e.addr, TotalSize: e.size, Stream: e.stream,
		IsLarge: e.size > smallSegmentMax, PoolID: e.pool, HasPoolID: e.hasPID,
		IsExpandable: expandable, Frames: e.frames,
	}
}

// mapRange adds a mapped range as expandable memory, merged with adjacent
// segments on the same stream (forward of segment_map).
func (st *segState) mapRange(e *entryView, device int) {
	if e.size <= 0 {
		return
	}
	s := newSegment(e, device, true)
	st.segMap()
	for base, n := range st.segs {
		if n.Stream == s.Stream && n.End() == s.Address {
			delete(st.segs, base)
			n.TotalSize += s.TotalSize
			s = n
			break
		}
	}
	if n, ok := st.segs[s.End()]; ok && n.Stream == s.Stream {
		delete(st.segs, n.Address)
		s.TotalSize += n.TotalSize
	}
	st.segs[s.Address] = s
}

// unmapRange removes [addr, addr+size) from the segment containing it
// (forward of segment_unmap): shrink from either end, split, or remove.
func (st *segState) unmapRange(addr uint64, size int64) {
	end := addr + uint64(size)
	st.segMap()
	for base, s := range st.segs {
		if addr < s.Address || addr >= s.End() {
			continue
		}
		sEnd := s.End()
		delete(st.segs, base)
		if addr > s.Address {
			head := s
			head.TotalSize = int64(addr - s.Address)
			st.segs[head.Address] = head
		}
		if end < sEnd {
			tail := s
			tail.Address = end
			tail.TotalSize = int64(sEnd - end)
			st.segs[end] = tail
		}
		return
	}
}

// build materializes a sorted segment/block list into a State: each segment
// tiled by its live blocks and inactive blocks filling the gaps. Live blocks
// outside every segment are dropped (as replay's StateAfter does).
func build(device int, segs []snapshot.Segment, blocks []liveBlock) ([]snapshot.Segment, []Gap) {
	out := make([]snapshot.Segment, 0, len(segs))
	for _, s := range segs {
		// a hostile or broken source can describe empty, negative or
		// address-wrapping segments: they hold nothing and are left out
		if s.TotalSize > 0 && s.End() > s.Address {
			out = append(out, s)
		}
	}
	var gaps []Gap
	// every block in a segment brings at most one gap before it, and each
	// segment one gap at its end: one backing array holds all of them
	all := make([]snapshot.Block, 0, 2*len(blocks)+len(out))
	bi := 0
	for si := range out {
		s := &out[si]
		s.Device = device
		s.AllocatedSize, s.ActiveSize, s.RequestedSize = 0, 0, 0
		for bi < len(blocks) && blocks[bi].addr < s.Address {
			bi++
		}
		from := len(all)
		cur, end := s.Address, s.End()
		for bi < len(blocks) && blocks[bi].addr < end {
			b := blocks[bi]
			bi++
			if b.addr > cur {
				all = append(all, snapshot.Block{Address: cur, Size: int64(b.addr - cur)})
				gaps = append(gaps, Gap{Address: cur, Size: int64(b.addr - cur)})
			}
			all = append(all, snapshot.Block{Address: b.addr, Size: b.size, RequestedSize: b.req, State: b.state, Frames: b.frames})
			s.ActiveSize += b.size
			s.RequestedSize += b.req
			if b.state == snapshot.StateActiveAllocated {
				s.AllocatedSize += b.size
			}
			if bEnd := b.addr + uint64(b.size); bEnd > cur {
				cur = bEnd
			}
		}
		if cur < end {
			all = append(all, snapshot.Block{Address: cur, Size: int64(end - cur)})
			gaps = append(gaps, Gap{Address: cur, Size: int64(end - cur)})
		}
		s.Blocks = all[from:len(all):len(all)]
	}
	return out, gaps
}

// measure walks segments and blocks exactly as build does and returns
// only what Summary needs — the number of segments build keeps, the number
// of blocks tiling them (live and inactive), the total and largest free
// range and Σ active_allocated block sizes — without building anything.
func measure(segs []snapshot.Segment, blocks []liveBlock) (n, tiles int, free, largest, allocated int64) {
	bi := 0
	gap := func(size int64) {
		tiles++
		free += size
		largest = max(largest, size)
	}
	for _, s := range segs {
		if s.TotalSize <= 0 || s.End() <= s.Address {
			continue
		}
		n++
		for bi < len(blocks) && blocks[bi].addr < s.Address {
			bi++
		}
		cur, end := s.Address, s.End()
		for bi < len(blocks) && blocks[bi].addr < end {
			b := blocks[bi]
			bi++
			tiles++
			if b.state == snapshot.StateActiveAllocated {
				allocated += b.size
			}
			if b.addr > cur {
				gap(int64(b.addr - cur))
			}
			if bEnd := b.addr + uint64(b.size); bEnd > cur {
				cur = bEnd
			}
		}
		if cur < end {
			gap(int64(end - cur))
		}
	}
	return n, tiles, free, largest, allocated
}

// stateFromSegments loads segments (with blocks) as a mutable state,
// keeping only live blocks.
func stateFromSegments(segs []snapshot.Segment) *segState {
	st := newSegState()
	for i := range segs {
		s := segs[i]
		s.Blocks = nil
		st.segs[s.Address] = s
		for _, b := range segs[i].Blocks {
			if b.State.Active() {
				st.blocks[b.Address] = initialBlock(&b)
			}
		}
	}
	return st
}

// initialBlock is a block live before the log: its stack from any schema
// (replay.BlockFrames: frames, else the 2.0 / 1.13 history).
func initialBlock(b *snapshot.Block) liveBlock {
	return liveBlock{addr: b.Address, size: b.Size, req: b.RequestedSize, frames: replay.BlockFrames(b), state: b.State, born: -1}
}
