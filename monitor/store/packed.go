package store

import (
	"math"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/tiling"
)

// A capture's checkpoints copy every live block (40 bytes each), and with
// as many entries between checkpoints as blocks are live that is 40 bytes
// an entry, as much as the records. Most live blocks were allocated by an
// entry of the log, and that entry's record holds their address,
// requested size and stack: such a block is kept as the entry's position
// and its state (5 bytes; its size too where the request does not give
// it), the others whole. A packed checkpoint's blocks are nil;
// checkpointAt unpacks it (unpack).

// packedBlocks are a packed checkpoint's blocks; immutable once made.
// A block born in the log is its entry's position and a byte of flags
// (its state, whether it is an estimate, whether its size is kept): its
// size is kept (sizes, in order) only where it is not the one its
// request gives (d.sizeOf), as for a block that survives to the end. So
// most live blocks take 5 bytes. sorted: born and whole are each in
// address order (unpack merges them), as the first unpack leaves them.
type packedBlocks struct {
	born   []uint32
	flags  []uint8
	sizes  []int64
	whole  []tiling.Block
	sorted bool
}

const (
	stateMask = 1<<6 - 1
	flagEst   = 1 << 6
	flagSized = 1 << 7 // the size is the next of sizes
)

// sizeOf is the size a block born in the log for a request of req bytes
// gets when nothing overrides it: rounded when it is an estimate.
func (d *devLog) sizeOf(req int64, est bool) int64 {
	if est && d.ov.Round != nil {
		return d.ov.Round(req)
	}
	return req
}

// dumpPacked is d.head.Dump(at), packed when that is smaller: a packed
// checkpoint's blocks are nil, and their packed form is in d.packed. Only
// a log whose records are never dropped (no retention) packs: unpacking
// reads the records. The blocks are dumped into one scratch buffer, which
// a checkpoint left whole keeps.
func (d *devLog) dumpPacked(at int64) *checkpoint {
	if !d.packs {
		return d.head.Dump(at)
	}
	cp := d.head.DumpInto(at, d.scratch)
	p := d.packBlocks(cp.Blocks)
	if p == nil {
		d.scratch = nil
		return cp
	}
	if d.packed == nil {
		d.packed = map[*checkpoint]*packedBlocks{}
	}
	d.packed[cp] = p
	d.scratch, cp.Blocks = cp.Blocks, nil
	return cp
}

// packable reports whether b is the block the record of the alloc entry
// at b.Born gives, but for its size and state.
func (d *devLog) packable(b *tiling.Block) bool {
	if b.Born < 0 || b.Born >= int64(d.recs.Len()) || b.Born > math.MaxUint32 || b.State > stateMask {
		return false
	}
	r := d.recs.ptr(int(b.Born))
	return d.recs.action(int(b.Born)) == snapshot.ActionAlloc && r.addr == b.Addr && r.size == b.Req && r.frames == b.Frames
}

// packBlocks packs blocks, in their order; nil when fewer than half of
// them pack.
func (d *devLog) packBlocks(blocks []tiling.Block) *packedBlocks {
	k := 0
	for i := range blocks {
		if d.packable(&blocks[i]) {
			k++
		}
	}
	if k < len(blocks)/2 {
		return nil
	}
	p := &packedBlocks{born: make([]uint32, 0, k), flags: make([]uint8, 0, k), whole: make([]tiling.Block, 0, len(blocks)-k)}
	for i := range blocks {
		b := &blocks[i]
		if !d.packable(b) {
			p.whole = append(p.whole, *b)
			continue
		}
		f := uint8(b.State)
		if b.Est {
			f |= flagEst
		}
		if b.Size != d.sizeOf(b.Req, b.Est) {
			f |= flagSized
			p.sizes = append(p.sizes, b.Size)
		}
		p.born = append(p.born, uint32(b.Born))
		p.flags = append(p.flags, f)
	}
	return p
}

// unpack returns cp with its blocks when cp is packed (a fresh sorted
// checkpoint, the last one kept for the next query), else cp.
func (d *devLog) unpack(cp *checkpoint) *checkpoint {
	d.lastMu.Lock()
	p := d.packed[cp]
	src, u := d.unpackedFrom, d.unpacked
	d.lastMu.Unlock()
	if p == nil {
		return cp
	}
	if src == cp {
		return u
	}
	u = &checkpoint{At: cp.At, Segs: cp.Segs, Blocks: d.blocksOf(p)}
	u.EnsureSorted() // a pass over sorted blocks once p is sorted
	var sorted *packedBlocks
	if !p.sorted { // pack again in address order: later unpacks need no sort
		if sorted = d.packBlocks(u.Blocks); sorted != nil {
			sorted.sorted = true
		}
	}
	d.lastMu.Lock()
	if sorted != nil {
		d.packed[cp] = sorted
	}
	d.unpackedFrom, d.unpacked = cp, u
	d.lastMu.Unlock()
	return u
}

// blocksOf is packed blocks p unpacked (merged in address order when p is
// sorted).
func (d *devLog) blocksOf(p *packedBlocks) []tiling.Block {
	blocks := make([]tiling.Block, 0, len(p.born)+len(p.whole))
	w := p.whole
	round, sizes := d.ov.Round, p.sizes
	for i, born := range p.born {
		f := p.flags[i]
		r := d.recs.ptr(int(born))
		b := tiling.Block{Addr: r.addr, Req: r.size, Frames: r.frames, State: snapshot.BlockState(f & stateMask), Est: f&flagEst != 0, Born: int64(born)}
		switch { // as sizeOf
		case f&flagSized != 0:
			b.Size, sizes = sizes[0], sizes[1:]
		case b.Est && round != nil:
			b.Size = round(b.Req)
		default:
			b.Size = b.Req
		}
		for p.sorted && len(w) > 0 && w[0].Addr < b.Addr { // merge the two address-ordered lists
			blocks = append(blocks, w[0])
			w = w[1:]
		}
		blocks = append(blocks, b)
	}
	return append(blocks, w...)
}
