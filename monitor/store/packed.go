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
// requested size and stack: such a block is kept as the entry's position,
// its size and its state (16 bytes), the others whole. A packed
// checkpoint's blocks are nil; checkpointAt unpacks it (unpack).

// packedBlock is a live block born by the alloc entry at born.
type packedBlock struct {
	born  uint32
	state snapshot.BlockState
	est   bool
	size  int64
}

// packedBlocks are a packed checkpoint's blocks.
type packedBlocks struct {
	born  []packedBlock
	whole []tiling.Block
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
	n := int64(d.recs.Len())
	packable := func(b *tiling.Block) bool {
		if b.Born < 0 || b.Born >= n || b.Born > math.MaxUint32 {
			return false
		}
		r := d.recs.ptr(int(b.Born))
		return r.action == snapshot.ActionAlloc && r.addr == b.Addr && r.size == b.Req && r.frames == b.Frames
	}
	k := 0
	for i := range cp.Blocks {
		if packable(&cp.Blocks[i]) {
			k++
		}
	}
	if k < len(cp.Blocks)/2 {
		d.scratch = nil
		return cp
	}
	p := &packedBlocks{born: make([]packedBlock, 0, k), whole: make([]tiling.Block, 0, len(cp.Blocks)-k)}
	for i := range cp.Blocks {
		b := &cp.Blocks[i]
		if packable(b) {
			p.born = append(p.born, packedBlock{born: uint32(b.Born), state: b.State, est: b.Est, size: b.Size})
		} else {
			p.whole = append(p.whole, *b)
		}
	}
	if d.packed == nil {
		d.packed = map[*checkpoint]*packedBlocks{}
	}
	d.packed[cp] = p
	d.scratch, cp.Blocks = cp.Blocks, nil
	return cp
}

// unpack returns cp with its blocks when cp is packed (a fresh sorted
// checkpoint, the last one kept for the next query), else cp.
func (d *devLog) unpack(cp *checkpoint) *checkpoint {
	p := d.packed[cp]
	if p == nil {
		return cp
	}
	d.lastMu.Lock()
	src, u := d.unpackedFrom, d.unpacked
	d.lastMu.Unlock()
	if src == cp {
		return u
	}
	blocks := make([]tiling.Block, 0, len(p.born)+len(p.whole))
	for _, b := range p.born {
		r := d.recs.ptr(int(b.born))
		blocks = append(blocks, tiling.Block{Addr: r.addr, Size: b.size, Req: r.size, Frames: r.frames, State: b.state, Est: b.est, Born: int64(b.born)})
	}
	blocks = append(blocks, p.whole...)
	u = &checkpoint{At: cp.At, Segs: cp.Segs, Blocks: blocks}
	u.EnsureSorted()
	d.lastMu.Lock()
	d.unpackedFrom, d.unpacked = cp, u
	d.lastMu.Unlock()
	return u
}
