package tiling

import "github.com/npumon/npumon/allocator/snapshot"

// tiler walks sorted live blocks through sorted segments: per segment its
// live blocks in address order and the inactive ranges between them.
// Live blocks outside every segment are skipped. It is the one tiling
// walk behind Build and Measure.
type tiler struct {
	blocks   []Block
	bi       int
	cur, end uint64
}

// holds reports whether a segment holds anything: a hostile or broken
// source can describe empty, negative or address-wrapping segments.
func holds(s *snapshot.Segment) bool { return s.TotalSize > 0 && s.End() > s.Address }

// enter starts segment s (one that holds something, in address order).
func (t *tiler) enter(s *snapshot.Segment) {
	for t.bi < len(t.blocks) && t.blocks[t.bi].Addr < s.Address {
		t.bi++ // outside every segment
	}
	t.cur, t.end = s.Address, s.End()
}

// next returns the segment's next live block with the inactive range
// before it (gap 0: none); b nil: the segment is done, gap is the inactive
// range at its end.
func (t *tiler) next() (b *Block, at uint64, gap int64) {
	at = t.cur
	if t.bi < len(t.blocks) && t.blocks[t.bi].Addr < t.end {
		b = &t.blocks[t.bi]
		t.bi++
		if b.Addr > t.cur {
			gap = int64(b.Addr - t.cur)
		}
		if e := b.Addr + uint64(b.Size); e > t.cur {
			t.cur = e
		}
		return b, at, gap
	}
	if t.cur < t.end {
		gap = int64(t.end - t.cur)
		t.cur = t.end
	}
	return nil, at, gap
}

// Figures are what a tiled segment map adds up to.
type Figures struct {
	Segments    int   // segments that hold something
	Blocks      int   // blocks tiling them: live ones and the inactive ranges
	LiveBlocks  int   // live blocks inside them
	Reserved    int64 // Σ segment sizes
	Allocated   int64 // Σ sizes of active_allocated blocks
	Requested   int64 // Σ requested sizes of active_allocated blocks
	Free        int64 // Σ inactive ranges
	LargestFree int64 // the largest inactive range
}

func (f *Figures) live(b *snapshot.Block) {
	f.Blocks++
	f.LiveBlocks++
	if b.State == snapshot.StateActiveAllocated {
		f.Allocated += b.Size
		f.Requested += b.RequestedSize
	}
}

func (f *Figures) free(size int64) {
	f.Blocks++
	f.Free += size
	f.LargestFree = max(f.LargestFree, size)
}

// FiguresOf adds up an already tiled segment list (a file's final state,
// or Build's result): every segment and block as given.
func FiguresOf(segs []snapshot.Segment) Figures {
	var f Figures
	f.Segments = len(segs)
	for i := range segs {
		f.Reserved += segs[i].TotalSize
		for j := range segs[i].Blocks {
			b := &segs[i].Blocks[j]
			switch b.State {
			case snapshot.StateActiveAllocated, snapshot.StateActivePendingFree:
				f.live(b)
			case snapshot.StateInactive:
				f.free(b.Size)
			default:
				f.Blocks++
			}
		}
	}
	return f
}

// Measure is Build's Figures without building anything: the same walk
// over sorted segments and sorted live blocks.
func Measure(segs []snapshot.Segment, blocks []Block) Figures {
	var f Figures
	t := tiler{blocks: blocks}
	for i := range segs {
		s := &segs[i]
		if !holds(s) {
			continue
		}
		f.Segments++
		f.Reserved += s.TotalSize
		t.enter(s)
		for {
			b, _, gap := t.next()
			if gap > 0 {
				f.free(gap)
			}
			if b == nil {
				break
			}
			f.Blocks++
			f.LiveBlocks++
			if b.State == snapshot.StateActiveAllocated {
				f.Allocated += b.Size
				f.Requested += b.Req
			}
		}
	}
	return f
}

// Tiling is a segment map tiled: segments sorted by address, each with its
// blocks (live ones and inactive ones filling the gaps).
type Tiling struct {
	Segments []snapshot.Segment
	Gaps     []Range // the inactive blocks again, in address order
	// Estimated counts the placed live blocks whose size is round(Req)
	// (Block.Est) rather than a size the file records.
	Estimated int
	Figures   Figures
}

// Build tiles sorted segments with sorted live blocks. Segments that hold
// nothing are left out, and so are live blocks outside every segment.
// Each segment's allocated, active and requested sizes are recomputed.
// restore, if not nil, may replace each placed live block's output (a
// caller that kept the file's blocks puts back what Block does not carry).
func Build(device int, segs []snapshot.Segment, blocks []Block, restore func(*Block, *snapshot.Block)) Tiling {
	var tl Tiling
	out := make([]snapshot.Segment, 0, len(segs))
	for i := range segs {
		if holds(&segs[i]) {
			out = append(out, segs[i])
		}
	}
	// every block in a segment brings at most one gap before it, and each
	// segment one gap at its end: one backing array holds all of them
	all := make([]snapshot.Block, 0, 2*len(blocks)+len(out))
	f := &tl.Figures
	f.Segments = len(out)
	t := tiler{blocks: blocks}
	for si := range out {
		s := &out[si]
		s.Device = device
		s.AllocatedSize, s.ActiveSize, s.RequestedSize = 0, 0, 0
		f.Reserved += s.TotalSize
		t.enter(s)
		from := len(all)
		for {
			b, at, gap := t.next()
			if gap > 0 {
				all = append(all, snapshot.Block{Address: at, Size: gap})
				tl.Gaps = append(tl.Gaps, Range{Address: at, Size: gap})
				f.free(gap)
			}
			if b == nil {
				break
			}
			all = append(all, snapshot.Block{Address: b.Addr, Size: b.Size, RequestedSize: b.Req, State: b.State, Frames: b.Frames})
			ob := &all[len(all)-1]
			if b.Est {
				tl.Estimated++
			}
			if restore != nil {
				restore(b, ob)
			}
			s.ActiveSize += ob.Size
			s.RequestedSize += ob.RequestedSize
			if ob.State == snapshot.StateActiveAllocated {
				s.AllocatedSize += ob.Size
			}
			f.live(ob)
		}
		s.Blocks = all[from:len(all):len(all)]
	}
	tl.Segments = out
	return tl
}
