package allocator

import (
	"iter"
	"slices"

	"github.com/npumon/npumon/acl"
)

// poolKey is a free block's place in a pool's set: the best-fit order
// (stream, size, ptr) — size 0 in the unmapped set, which is ordered by
// (stream, ptr) — and the block's index in the allocator's block table.
// A key holds no pointer: the sets' memory is never scanned by the
// garbage collector, moves without write barriers, and a search compares
// keys in place instead of loading each probed block.
type poolKey struct {
	stream acl.Stream
	size   int64
	ptr    uint64
	id     int32 // blockTable index
}

// less is the set order; ids never decide it (no two free blocks of a set
// share an address).
func (k *poolKey) less(o *poolKey) bool {
	if k.stream != o.stream {
		return k.stream < o.stream
	}
	if k.size != o.size {
		return k.size < o.size
	}
	return k.ptr < o.ptr
}

// chunkMax bounds a chunk of a keySet: a chunk is split in two past it, so
// an insert or delete moves at most chunkMax keys (2 KiB).
const chunkMax = 64

// keySet is an ordered set of poolKeys kept as sorted chunks of at most
// chunkMax keys, in order (a two-level B+-tree): a search is a binary search
// over the chunks' last keys and one within a chunk; an insert or delete
// moves the keys of one chunk only. A pool of fewer than chunkMax free
// blocks — the allocator's usual case — is one sorted slice. Chunks are never
// empty, except for the only one.
type keySet struct {
	chunks [][]poolKey
	lasts  []poolKey // each chunk's last key: the chunk search probes one array
	n      int
}

// cursor is a position in a keySet; c == len(chunks) is the end. Any
// insert or delete invalidates cursors, update (in place) does not.
type cursor struct{ c, i int }

func (s *keySet) len() int { return s.n }

func (s *keySet) valid(at cursor) bool {
	return at.c >= 0 && at.c < len(s.chunks) && at.i < len(s.chunks[at.c])
}

// key returns the key at a valid cursor.
func (s *keySet) key(at cursor) *poolKey { return &s.chunks[at.c][at.i] }

func (s *keySet) end() cursor { return cursor{len(s.chunks), 0} }

func (s *keySet) next(at cursor) cursor {
	at.i++
	if at.i == len(s.chunks[at.c]) {
		return cursor{at.c + 1, 0}
	}
	return at
}

// prev returns the position before at; c < 0 when at is the first.
func (s *keySet) prev(at cursor) cursor {
	if at.i > 0 {
		at.i--
		return at
	}
	if at.c == 0 {
		return cursor{-1, 0}
	}
	return cursor{at.c - 1, len(s.chunks[at.c-1]) - 1}
}

// last returns the position of the greatest key; c < 0 when s is empty.
func (s *keySet) last() cursor {
	if s.n == 0 {
		return cursor{-1, 0}
	}
	c := len(s.chunks) - 1
	return cursor{c, len(s.chunks[c]) - 1}
}

// chunkFor returns the first chunk whose last key is not less than k, the
// last chunk when there is none.
func (s *keySet) chunkFor(k *poolKey) int {
	ls := s.lasts
	lo, hi := 0, len(ls)-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ls[m].less(k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// lowerBound returns the index of the first key of ch not less than k: a
// binary search down to eight keys, then a scan, which costs fewer
// mispredicted branches on the short runs a pool's chunks mostly are.
func lowerBound(ch []poolKey, k *poolKey) int {
	lo, hi := 0, len(ch)
	for hi-lo > 8 {
		m := int(uint(lo+hi) >> 1)
		if ch[m].less(k) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for lo < hi && ch[lo].less(k) {
		lo++
	}
	return lo
}

// seek returns the position of the first key not less than k (the end
// when there is none).
func (s *keySet) seek(k poolKey) cursor {
	if s.n == 0 {
		return s.end()
	}
	c := 0
	if len(s.chunks) > 1 {
		c = s.chunkFor(&k)
	}
	i := lowerBound(s.chunks[c], &k)
	if i == len(s.chunks[c]) {
		return s.end() // only the last chunk's keys can all be less
	}
	return cursor{c, i}
}

// find returns the position of k's block (same order key and id).
func (s *keySet) find(k poolKey) (cursor, bool) {
	at := s.seek(k)
	if s.valid(at) && s.key(at).id == k.id {
		return at, true
	}
	return at, false
}

func (s *keySet) insert(k poolKey) {
	if len(s.chunks) == 0 {
		s.chunks = append(s.chunks, make([]poolKey, 0, 16))
		s.lasts = append(s.lasts, k)
	}
	c := 0
	if len(s.chunks) > 1 {
		c = s.chunkFor(&k)
	}
	ch := s.chunks[c]
	i := lowerBound(ch, &k)
	ch = slices.Insert(ch, i, k)
	s.chunks[c] = ch
	s.n++
	if i == len(ch)-1 {
		s.lasts[c] = k
	}
	if len(ch) > chunkMax {
		s.split(c)
	}
}

// split halves chunk c.
func (s *keySet) split(c int) {
	ch := s.chunks[c]
	h := len(ch) / 2
	hi := make([]poolKey, len(ch)-h, chunkMax+1)
	copy(hi, ch[h:])
	s.chunks[c] = ch[:h]
	s.chunks = slices.Insert(s.chunks, c+1, hi)
	s.lasts = slices.Insert(s.lasts, c, ch[h-1])
}

// fixLast refreshes chunk c's entry of lasts.
func (s *keySet) fixLast(c int) {
	if ch := s.chunks[c]; len(ch) > 0 {
		s.lasts[c] = ch[len(ch)-1]
	}
}

// delete removes the key at a valid cursor.
func (s *keySet) delete(at cursor) {
	c := at.c
	ch := slices.Delete(s.chunks[c], at.i, at.i+1)
	s.chunks[c] = ch
	s.n--
	if at.i == len(ch) {
		s.fixLast(c)
	}
	if len(s.chunks) == 1 {
		return
	}
	switch {
	case len(ch) == 0:
		s.chunks = slices.Delete(s.chunks, c, c+1)
		s.lasts = slices.Delete(s.lasts, c, c+1)
	case len(ch) < chunkMax/4:
		// Merge a small chunk into a neighbour with room, so that the
		// chunks stay at least a quarter full on average.
		if c+1 < len(s.chunks) && len(ch)+len(s.chunks[c+1]) <= chunkMax/2 {
			s.chunks[c] = append(ch, s.chunks[c+1]...)
			s.chunks = slices.Delete(s.chunks, c+1, c+2)
			s.lasts = slices.Delete(s.lasts, c, c+1)
		} else if c > 0 && len(ch)+len(s.chunks[c-1]) <= chunkMax/2 {
			s.chunks[c-1] = append(s.chunks[c-1], ch...)
			s.chunks = slices.Delete(s.chunks, c, c+1)
			s.lasts = slices.Delete(s.lasts, c-1, c)
		}
	}
}

// update replaces the key at a valid cursor with k. When k still falls
// between the chunk's neighbours — the remainder of a split or a block
// merged back, the common case — it shifts the keys between its old and
// new place by one inside the chunk (none when it keeps its place);
// otherwise it is a delete and an insert.
func (s *keySet) update(at cursor, k poolKey) {
	ch := s.chunks[at.c]
	if (at.c > 0 && !lastOf(s.chunks[at.c-1]).less(&k)) || (at.c+1 < len(s.chunks) && !k.less(&s.chunks[at.c+1][0])) {
		s.delete(at)
		s.insert(k)
		return
	}
	i, j := at.i, at.i
	switch {
	case i > 0 && k.less(&ch[i-1]):
		// Toward the front: shift the greater keys up by one; a few by
		// hand, a longer run found by a search and moved at once.
		for ; j > 0 && k.less(&ch[j-1]); j-- {
			if i-j == 4 {
				j = lowerBound(ch[:j], &k)
				copy(ch[j+1:i-3], ch[j:i-4])
				break
			}
			ch[j] = ch[j-1]
		}
	case i+1 < len(ch) && ch[i+1].less(&k):
		for ; j+1 < len(ch) && ch[j+1].less(&k); j++ {
			if j-i == 4 {
				n := j + 1 + lowerBound(ch[j+1:], &k) // ch[j+1:n] are less than k
				copy(ch[j:n-1], ch[j+1:n])
				j = n - 1
				break
			}
			ch[j] = ch[j+1]
		}
	}
	ch[j] = k
	if last := len(ch) - 1; i == last || j == last {
		s.lasts[at.c] = ch[last]
	}
}

func lastOf(ch []poolKey) *poolKey { return &ch[len(ch)-1] }

// all yields the keys in order. The set must not change meanwhile.
func (s *keySet) all() iter.Seq[*poolKey] {
	return func(yield func(*poolKey) bool) {
		for _, ch := range s.chunks {
			for i := range ch {
				if !yield(&ch[i]) {
					return
				}
			}
		}
	}
}

// blockTable maps a poolKey's id to its block. Every block struct the
// allocator made has an id for its life, recycled ones included; the
// struct of a dropped id is let go and the id reused.
type blockTable struct {
	blocks []*block
	free   []int32 // ids whose struct was let go
}

func (t *blockTable) add(b *block) {
	if n := len(t.free); n > 0 {
		b.id = t.free[n-1]
		t.free = t.free[:n-1]
		t.blocks[b.id] = b
		return
	}
	b.id = int32(len(t.blocks))
	t.blocks = append(t.blocks, b)
}

func (t *blockTable) drop(id int32) {
	t.blocks[id] = nil
	t.free = append(t.free, id)
}
