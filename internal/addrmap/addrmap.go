// Package addrmap is a hash table keyed by device address for the walks
// over a trace that keep one record per live address (the undo walk's
// blocks in replay/tiling, explain's Walker): open addressing with linear
// probing, values inline, at most half full, deletion by shifting the
// probe run back (no tombstones). Each of those walks does a lookup and
// an insert or delete per entry, a million of them on a 1M-entry trace,
// on a few thousand live addresses; a Go map spends several times as
// long per operation on that (hashing, groups, growth in steps).
package addrmap

import "iter"

// Map maps addresses to values of type V. The zero Map is empty and ready
// to use. Pointers it returns stay valid until the next Insert, Put or
// Delete.
type Map[V any] struct {
	slots []slot[V]
	n     int
	bits  uint
}

type slot[V any] struct {
	key  uint64
	used bool
	val  V
}

// minBits is the smallest table: 8 slots.
const minBits = 3

// home is k's first slot: Fibonacci hashing (addresses are multiples of
// a power of two; the multiply spreads them over the top bits).
func (m *Map[V]) home(k uint64) int {
	return int((k * 0x9E3779B97F4A7C15) >> (64 - m.bits))
}

// Len is the number of addresses held.
func (m *Map[V]) Len() int { return m.n }

// Reserve makes room for n addresses without growing.
func (m *Map[V]) Reserve(n int) {
	bits := uint(minBits)
	for 1<<bits < 2*n {
		bits++
	}
	if bits > m.bits {
		m.rehash(bits)
	}
}

// index is k's slot, -1 when k is absent.
func (m *Map[V]) index(k uint64) int {
	if m.n == 0 {
		return -1
	}
	mask := len(m.slots) - 1
	for i := m.home(k); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if !s.used {
			return -1
		}
		if s.key == k {
			return i
		}
	}
}

// Get is k's value; ok false (and the zero V) when k is absent.
func (m *Map[V]) Get(k uint64) (v V, ok bool) {
	if i := m.index(k); i >= 0 {
		return m.slots[i].val, true
	}
	return v, false
}

// Ptr is a pointer to k's value, nil when k is absent.
func (m *Map[V]) Ptr(k uint64) *V {
	if i := m.index(k); i >= 0 {
		return &m.slots[i].val
	}
	return nil
}

// Insert returns a pointer to k's value, adding k with the zero V when
// absent; added reports which.
func (m *Map[V]) Insert(k uint64) (v *V, added bool) {
	if i := m.index(k); i >= 0 {
		return &m.slots[i].val, false
	}
	if 2*(m.n+1) > len(m.slots) {
		m.rehash(max(m.bits+1, minBits))
	}
	mask := len(m.slots) - 1
	i := m.home(k)
	for m.slots[i].used {
		i = (i + 1) & mask
	}
	m.slots[i] = slot[V]{key: k, used: true}
	m.n++
	return &m.slots[i].val, true
}

// Put sets k's value.
func (m *Map[V]) Put(k uint64, v V) {
	p, _ := m.Insert(k)
	*p = v
}

// Delete removes k; it reports whether k was there.
func (m *Map[V]) Delete(k uint64) bool {
	i := m.index(k)
	if i < 0 {
		return false
	}
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j].used; j = (j + 1) & mask {
		// move j back into the hole at i unless its home lies
		// cyclically in (i, j]
		h := m.home(m.slots[j].key)
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = slot[V]{}
	m.n--
	return true
}

// rehash moves every address into a table of 1<<bits slots.
func (m *Map[V]) rehash(bits uint) {
	old := m.slots
	m.bits = bits
	m.slots = make([]slot[V], 1<<bits)
	mask := len(m.slots) - 1
	for k := range old {
		if s := &old[k]; s.used {
			i := m.home(s.key)
			for m.slots[i].used {
				i = (i + 1) & mask
			}
			m.slots[i] = *s
		}
	}
}

// All yields every address and a pointer to its value, in no particular
// order; the pointers are valid while the loop makes no Insert, Put or
// Delete.
func (m *Map[V]) All() iter.Seq2[uint64, *V] {
	return func(yield func(uint64, *V) bool) {
		for i := range m.slots {
			if s := &m.slots[i]; s.used && !yield(s.key, &s.val) {
				return
			}
		}
	}
}
