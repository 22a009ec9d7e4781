package acl

import (
	"slices"
	"sort"
)

// span is a half-open address range [start, end).
type span struct{ start, end uint64 }

// freeMap is a sorted list of disjoint, non-adjacent free ranges of one
// address space. Placement is first fit in address order, which makes it
// deterministic; release coalesces with both neighbours.
type freeMap struct {
	free []span
}

func newFreeMap(base, size uint64) freeMap {
	return freeMap{free: []span{{base, base + size}}}
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

// find returns the lowest address aligned to align at which size bytes fit
// in one free range.
func (m *freeMap) find(size, align uint64) (uint64, bool) {
	for _, r := range m.free {
		a := alignUp(r.start, align)
		if a >= r.start && a <= r.end && r.end-a >= size {
			return a, true
		}
	}
	return 0, false
}

// isFree reports whether [addr, addr+size) lies inside one free range.
func (m *freeMap) isFree(addr, size uint64) bool {
	i := m.containing(addr)
	return i >= 0 && m.free[i].end-addr >= size
}

// containing returns the index of the free range holding addr, or -1.
func (m *freeMap) containing(addr uint64) int {
	i := sort.Search(len(m.free), func(i int) bool { return m.free[i].end > addr })
	if i < len(m.free) && m.free[i].start <= addr {
		return i
	}
	return -1
}

// take removes [addr, addr+size) from the free ranges; the caller has checked
// it is free (find or isFree).
func (m *freeMap) take(addr, size uint64) {
	i := m.containing(addr)
	r := m.free[i]
	end := addr + size
	switch {
	case r.start == addr && r.end == end:
		m.free = slices.Delete(m.free, i, i+1)
	case r.start == addr:
		m.free[i].start = end
	case r.end == end:
		m.free[i].end = addr
	default:
		m.free[i].end = addr
		m.free = slices.Insert(m.free, i+1, span{end, r.end})
	}
}

// release returns [addr, addr+size) to the free ranges, merging with
// neighbours. The range must not overlap a free range.
func (m *freeMap) release(addr, size uint64) {
	end := addr + size
	i := sort.Search(len(m.free), func(i int) bool { return m.free[i].start >= end })
	// i: first range starting at or after end; i-1 may end at addr.
	mergeNext := i < len(m.free) && m.free[i].start == end
	mergePrev := i > 0 && m.free[i-1].end == addr
	switch {
	case mergePrev && mergeNext:
		m.free[i-1].end = m.free[i].end
		m.free = slices.Delete(m.free, i, i+1)
	case mergePrev:
		m.free[i-1].end = end
	case mergeNext:
		m.free[i].start = addr
	default:
		m.free = slices.Insert(m.free, i, span{addr, end})
	}
}

// largest returns the size of the largest free range.
func (m *freeMap) largest() uint64 {
	var n uint64
	for _, r := range m.free {
		n = max(n, r.end-r.start)
	}
	return n
}
