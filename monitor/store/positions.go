package store

// positions is an increasing sequence of log positions (an action's
// index), packed as a byte series' values are (values): an action's
// positions a few entries apart, a full chunk holds them in 2 bytes each
// and 8 a group of 64; a chunk whose positions are farther apart (a rare
// action, a live log's positions past 2³² with a gap that far) takes 4
// bytes or 8 each, that chunk alone.
type positions struct{ v values }

// Len returns the number of positions.
func (p *positions) Len() int { return p.v.Len() }

// lo is the first index still held.
func (p *positions) lo() int { return p.v.lo() }

// at returns position i.
func (p *positions) at(i int) int64 { return p.v.at(i) }

// reserve sizes the first chunk for n positions when empty.
func (p *positions) reserve(n int) { p.v.reserve(n) }

// append adds x, which is greater than every position held.
func (p *positions) append(x int64) { p.v.append(x) }

// dropBefore releases the whole chunks holding only positions before index i.
func (p *positions) dropBefore(i int) { p.v.dropBefore(i) }

// below returns the number of positions less than n (the index of the
// first at or after it; indexes before lo are not searched).
func (p *positions) below(n int64) int {
	lo, hi := p.v.lo(), p.v.Len()
	if lo >= hi {
		return lo
	}
	// the chunk: the last whose first position is < n; then within it
	cs := p.v.chunks
	a, b := 0, len(cs)
	for a < b {
		m := int(uint(a+b) >> 1)
		if cs[m].at(0) < n {
			a = m + 1
		} else {
			b = m
		}
	}
	if a == 0 {
		return lo
	}
	c := &cs[a-1]
	i, j := lo+(a-1)<<chunkBits, min(lo+a<<chunkBits, hi) // the positions of chunk a-1
	for i < j {
		m := int(uint(i+j) >> 1)
		if c.at(m&chunkMask) < n {
			i = m + 1
		} else {
			j = m
		}
	}
	return i
}
