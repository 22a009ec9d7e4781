package allocator

import (
	"iter"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/snapshot"
)

// block is a contiguous piece of a segment
// (docs/reference/allocator-semantics.md §2, block fields).
type block struct {
	ptr        uint64
	size       int64
	requested  int64 // requested_size: the caller's size, pre-pad
	stream     acl.Stream
	streamUses []acl.Stream // extra streams recorded with RecordStream
	pool       *blockPool
	allocated  bool
	mapped     bool // false only for unmapped VA of an expandable segment
	prev, next *block
	eventCount int
	gcCount    int64
	expandable *expandableSegment
	frames     snapshot.StackID // context_when_allocated
	segFrames  snapshot.StackID // context_when_segment_allocated
	id         int32            // blockTable index, kept for the struct's life
}

func (b *block) isSplit() bool { return b.prev != nil || b.next != nil }

// linkBefore puts b into at's segment chain just before at.
func (b *block) linkBefore(at *block) {
	b.prev, b.next = at.prev, at
	if at.prev != nil {
		at.prev.next = b
	}
	at.prev = b
}

// linkAfter puts b into at's segment chain just after at.
func (b *block) linkAfter(at *block) {
	b.prev, b.next = at, at.next
	if at.next != nil {
		at.next.prev = b
	}
	at.next = b
}

// free reports whether b can be merged or reused: not allocated, no
// pending events, no recorded streams.
func (b *block) free() bool {
	return b != nil && !b.allocated && b.eventCount == 0 && len(b.streamUses) == 0
}

// blockPool holds the free blocks of one pool (small or large): blocks in
// (stream, size, ptr) order for best fit, unmapped ones of expandable
// segments in (stream, ptr) order. The sets hold keys (keySet); tab resolves
// a key's block.
type blockPool struct {
	blocks   keySet
	unmapped keySet
	small    bool
	tab      *blockTable
}

func (b *block) key() poolKey     { return poolKey{stream: b.stream, size: b.size, ptr: b.ptr, id: b.id} }
func (b *block) addrKey() poolKey { return poolKey{stream: b.stream, ptr: b.ptr, id: b.id} }

// lessSize orders blocks by (stream, size, ptr), the order of blocks.
func lessSize(b *block, stream acl.Stream, size int64, ptr uint64) bool {
	k := b.key()
	return k.less(&poolKey{stream: stream, size: size, ptr: ptr})
}

// lessAddr orders blocks by (stream, ptr), the order of unmapped.
func lessAddr(b *block, stream acl.Stream, ptr uint64) bool {
	k := b.addrKey()
	return k.less(&poolKey{stream: stream, ptr: ptr})
}

// at returns the block at a valid cursor of blocks.
func (p *blockPool) at(c cursor) *block { return p.tab.blocks[p.blocks.key(c).id] }

// unmappedAt returns the block at a valid cursor of unmapped.
func (p *blockPool) unmappedAt(c cursor) *block { return p.tab.blocks[p.unmapped.key(c).id] }

// freeBlocks yields the mapped free blocks in (stream, size, ptr) order; the
// pool must not change meanwhile.
func (p *blockPool) freeBlocks() iter.Seq[*block] {
	return func(yield func(*block) bool) {
		for k := range p.blocks.all() {
			if !yield(p.tab.blocks[k.id]) {
				return
			}
		}
	}
}

func (p *blockPool) insert(b *block) { p.blocks.insert(b.key()) }

func (p *blockPool) erase(b *block) {
	if at, ok := p.blocks.find(b.key()); ok {
		p.blocks.delete(at)
	}
}

func (p *blockPool) insertUnmapped(b *block) { p.unmapped.insert(b.addrKey()) }

func (p *blockPool) eraseUnmapped(b *block) {
	if at, ok := p.unmapped.find(b.addrKey()); ok {
		p.unmapped.delete(at)
	}
}

// eraseAny removes b from whichever set holds it.
func (p *blockPool) eraseAny(b *block) {
	if b.mapped {
		p.erase(b)
	} else {
		p.eraseUnmapped(b)
	}
}
