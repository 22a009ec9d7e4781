package store

// chunked is an append-only sequence stored in fixed-size chunks, so a
// growing log is never copied as a whole: appending allocates one new chunk
// every chunkLen elements (only the first chunk grows by doubling, which
// keeps small logs small), and pointers into it stay valid.
type chunked[T any] struct {
	chunks [][]T // every chunk but the last holds chunkLen elements
	n      int
}

const (
	chunkBits = 12
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1
)

// Len returns the number of elements.
func (c *chunked[T]) Len() int { return c.n }

// at returns element i.
func (c *chunked[T]) at(i int) T { return c.chunks[i>>chunkBits][i&chunkMask] }

// ptr returns a pointer to element i.
func (c *chunked[T]) ptr(i int) *T { return &c.chunks[i>>chunkBits][i&chunkMask] }

// set replaces element i.
func (c *chunked[T]) set(i int, x T) { c.chunks[i>>chunkBits][i&chunkMask] = x }

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
	k := c.n >> chunkBits
	if k == len(c.chunks) {
		if k == 0 {
			c.chunks = append(c.chunks, make([]T, 0, 16))
		} else {
			c.chunks = append(c.chunks, make([]T, 0, chunkLen))
		}
	}
	c.chunks[k] = append(c.chunks[k], x)
	c.n++
}

// reserve sizes the first chunk for n elements when the sequence is empty
// (a capture whose length is known), saving its doubling steps.
func (c *chunked[T]) reserve(n int) {
	if c.n == 0 && len(c.chunks) == 0 && n > 0 {
		c.chunks = append(c.chunks, make([]T, 0, min(n, chunkLen)))
	}
}

// each calls fn with the consecutive pieces of elements [i, j).
func (c *chunked[T]) each(i, j int, fn func([]T)) {
	for i < j {
		ch := c.chunks[i>>chunkBits]
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
	lo, hi := from, c.n
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
