package store

// chunked is an append-only sequence stored in fixed-size chunks, so a
// growing log is never copied as a whole: appending allocates one new chunk
// every chunkLen elements (only the first chunk grows by doubling, which
// keeps small logs small), and pointers into it stay valid. Chunks that
// dropBefore releases (a retention window thinning the log) are kept, up
// to maxSpare, and reused by append instead of allocating zeroed ones: a
// window's log turns over without allocating. A reused chunk is resliced
// to length 0 and every element is written by append before it can be
// read (at, ptr, each and search read only below Len), so nothing of its
// old contents is ever seen; element types hold no pointers, so nothing
// old is kept alive either.
type chunked[T any] struct {
	chunks [][]T // every chunk but the last holds chunkLen elements
	skip   int   // chunks dropped from the front (dropBefore); indexes stay global
	n      int
	spare  [][]T // dropped full-size chunks, reused by append (a retention window's log turns over without allocating)
}

// maxSpare bounds the dropped chunks kept for reuse.
const maxSpare = 4

const (
	chunkBits = 12
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1
)

// Len returns the number of elements.
func (c *chunked[T]) Len() int { return c.n }

// at returns element i.
func (c *chunked[T]) at(i int) T { return c.chunks[i>>chunkBits-c.skip][i&chunkMask] }

// ptr returns a pointer to element i.
func (c *chunked[T]) ptr(i int) *T { return &c.chunks[i>>chunkBits-c.skip][i&chunkMask] }

// set replaces element i.
func (c *chunked[T]) set(i int, x T) { c.chunks[i>>chunkBits-c.skip][i&chunkMask] = x }

// last returns the last element (the zero value when empty).
func (c *chunked[T]) last() T {
	var zero T
	if c.n == 0 {
		return zero
	}
	return c.at(c.n - 1)
}

// append adds x at the end.
func (c *chunked[T]) append(x T) {
	k := c.n>>chunkBits - c.skip
	if k == len(c.chunks) {
		switch {
		case c.n == 0:
			c.chunks = append(c.chunks, make([]T, 0, 16))
		case len(c.spare) > 0: // old contents are overwritten before they are read
			c.chunks = append(c.chunks, c.spare[len(c.spare)-1][:0])
			c.spare[len(c.spare)-1] = nil
			c.spare = c.spare[:len(c.spare)-1]
		default:
			c.chunks = append(c.chunks, make([]T, 0, chunkLen))
		}
	}
	if k == 0 && c.skip == 0 && len(c.chunks[0]) == cap(c.chunks[0]) {
		ch := c.chunks[0]
		// the first chunk doubles up to exactly chunkLen (append's own
		// growth rounds past it), so that once thinned it is reused too
		grown := make([]T, len(ch), min(2*cap(ch), chunkLen))
		copy(grown, ch)
		c.chunks[0] = grown
	}
	c.chunks[k] = append(c.chunks[k], x)
	c.n++
}

// appendAll appends xs: the runs that fit in the last chunk's capacity are
// copied at once (a batch's series values), the rest go through append.
func (c *chunked[T]) appendAll(xs []T) {
	for len(xs) > 0 {
		if k := c.n>>chunkBits - c.skip; k < len(c.chunks) {
			ch := c.chunks[k]
			if m := min(cap(ch)-len(ch), len(xs)); m > 0 { // cap ≤ chunkLen: the run stays in chunk k
				c.chunks[k] = append(ch, xs[:m]...)
				c.n += m
				xs = xs[m:]
				continue
			}
		}
		c.append(xs[0])
		xs = xs[1:]
	}
}

// reserve sizes the first chunk for n elements when the sequence is empty
// (a capture whose length is known), saving its doubling steps.
func (c *chunked[T]) reserve(n int) {
	if c.n == 0 && len(c.chunks) == 0 && n > 0 {
		c.chunks = append(c.chunks, make([]T, 0, min(n, chunkLen)))
	}
}

// lo is the first index still held: elements before it were dropped.
func (c *chunked[T]) lo() int { return c.skip << chunkBits }

// dropBefore releases the whole chunks holding only elements before i;
// indexes keep their meaning, and elements before lo() must not be read.
// The chunk being appended to is never dropped while it has room.
func (c *chunked[T]) dropBefore(i int) {
	k := min(i, c.n)>>chunkBits - c.skip
	if k <= 0 {
		return
	}
	for _, ch := range c.chunks[:k] {
		if cap(ch) == chunkLen && len(c.spare) < maxSpare {
			c.spare = append(c.spare, ch)
		}
	}
	clear(c.chunks[:k])
	c.chunks = c.chunks[k:]
	c.skip += k
}

// each calls fn with the consecutive pieces of elements [i, j).
func (c *chunked[T]) each(i, j int, fn func([]T)) {
	for i < j {
		ch := c.chunks[i>>chunkBits-c.skip]
		end := min(j-(i&^chunkMask), len(ch))
		fn(ch[i&chunkMask : end])
		i += end - i&chunkMask
	}
}

// search returns the smallest index i in [0, n) for which f(&element i) is
// true, assuming f is false then true over the sequence (sort.Search), or n.
func (c *chunked[T]) search(f func(*T) bool) int { return c.searchFrom(0, f) }

// searchFrom is search over [from, n).
func (c *chunked[T]) searchFrom(from int, f func(*T) bool) int {
	lo, hi := max(from, c.lo()), c.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(c.ptr(m)) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
