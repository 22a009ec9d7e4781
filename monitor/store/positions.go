package store

import "math"

// positions is an increasing sequence of log positions (an action's
// index) in 4 bytes an element: each chunk keeps its first position whole
// and the others as offsets from it. A live log's positions grow past
// 2³² (a retention window keeps them global), which one chunk's offsets
// can still hold unless two consecutive positions of the chunk are that
// far apart; then the sequence turns wide, 8 bytes an element, for good.
type positions struct {
	off  chunked[uint32]
	base chunked[int64] // per chunk: its first position (global chunk index)
	last int64          // the last chunk's base (append reads no chunk of base)
	wide *chunked[int64]
}

// Len returns the number of positions.
func (p *positions) Len() int {
	if p.wide != nil {
		return p.wide.Len()
	}
	return p.off.Len()
}

// lo is the first index still held.
func (p *positions) lo() int {
	if p.wide != nil {
		return p.wide.lo()
	}
	return p.off.lo()
}

// at returns position i.
func (p *positions) at(i int) int64 {
	if p.wide != nil {
		return p.wide.at(i)
	}
	return p.base.at(i>>chunkBits) + int64(p.off.at(i))
}

// reserve sizes the first chunk for n positions when empty.
func (p *positions) reserve(n int) {
	if p.wide == nil {
		p.off.reserve(n)
	}
}

// append adds x, which is greater than every position held.
func (p *positions) append(x int64) {
	if p.wide != nil {
		p.wide.append(x)
		return
	}
	i := p.off.Len()
	if i&chunkMask == 0 {
		p.base.append(x)
		p.off.append(0)
		p.last = x
		return
	}
	d := x - p.last
	if d > math.MaxUint32 {
		p.widen()
		p.wide.append(x)
		return
	}
	p.off.append(uint32(d))
}

// widen moves the held positions into wide.
func (p *positions) widen() {
	lo := p.off.lo()
	w := &chunked[int64]{skip: p.off.skip, n: lo}
	for i := lo; i < p.off.Len(); i++ {
		w.append(p.at(i))
	}
	p.wide, p.off, p.base = w, chunked[uint32]{}, chunked[int64]{}
}

// dropBefore releases the whole chunks holding only positions before index i.
func (p *positions) dropBefore(i int) {
	if p.wide != nil {
		p.wide.dropBefore(i)
		return
	}
	p.off.dropBefore(i)
	p.base.dropBefore(p.off.lo() >> chunkBits)
}

// below returns the number of positions less than n (the index of the
// first at or after it; indexes before lo are not searched).
func (p *positions) below(n int64) int {
	if p.wide != nil {
		return p.wide.search(func(s *int64) bool { return *s >= n })
	}
	// the chunk: the first whose base is ≥ n, less one; then within it
	lo, hi := p.off.lo(), p.off.Len()
	if lo >= hi {
		return lo
	}
	c := p.base.searchFrom(lo>>chunkBits, func(b *int64) bool { return *b >= n }) - 1
	if c < lo>>chunkBits {
		return lo
	}
	b := p.base.at(c)
	i, j := c<<chunkBits, min((c+1)<<chunkBits, hi) // the positions of chunk c
	for i < j {
		m := int(uint(i+j) >> 1)
		if b+int64(p.off.at(m)) < n {
			i = m + 1
		} else {
			j = m
		}
	}
	return i
}
