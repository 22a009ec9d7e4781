package allocator

import (
	"slices"

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

// blockPool holds the free blocks of one pool (small or large). blocks is
// ordered by (stream, size, ptr) for best fit, unmapped by (stream, ptr).
// Sorted slices keep this simple: free lists stay short enough that the
// memmove of an insert is cheaper than a tree's pointer chasing.
type blockPool struct {
	blocks   []*block
	unmapped []*block
	small    bool
}

// lessSize orders blocks by (stream, size, ptr); written out rather than
// with cmp.Compare so lowerBound inlines it.
func lessSize(b *block, stream acl.Stream, size int64, ptr uint64) bool {
	if b.stream != stream {
		return b.stream < stream
	}
	if b.size != size {
		return b.size < size
	}
	return b.ptr < ptr
}

func lessAddr(b *block, stream acl.Stream, ptr uint64) bool {
	if b.stream != stream {
		return b.stream < stream
	}
	return b.ptr < ptr
}

// lowerBound returns the index of the first block not less than the key
// (stream, size, ptr): a hand-written binary search, the hottest loop.
func (p *blockPool) lowerBound(stream acl.Stream, size int64, ptr uint64) int {
	lo, hi := 0, len(p.blocks)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if lessSize(p.blocks[m], stream, size, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (p *blockPool) insert(b *block) {
	i := p.lowerBound(b.stream, b.size, b.ptr)
	p.blocks = slices.Insert(p.blocks, i, b)
}

func (p *blockPool) erase(b *block) {
	i := p.lowerBound(b.stream, b.size, b.ptr)
	if i < len(p.blocks) && p.blocks[i] == b {
		p.blocks = slices.Delete(p.blocks, i, i+1)
	}
}

func (p *blockPool) unmappedLowerBound(stream acl.Stream, ptr uint64) int {
	lo, hi := 0, len(p.unmapped)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if lessAddr(p.unmapped[m], stream, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func (p *blockPool) insertUnmapped(b *block) {
	i := p.unmappedLowerBound(b.stream, b.ptr)
	p.unmapped = slices.Insert(p.unmapped, i, b)
}

func (p *blockPool) eraseUnmapped(b *block) {
	i := p.unmappedLowerBound(b.stream, b.ptr)
	if i < len(p.unmapped) && p.unmapped[i] == b {
		p.unmapped = slices.Delete(p.unmapped, i, i+1)
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
