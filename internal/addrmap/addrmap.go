// Package addrmap is a hash table keyed by device address for the walks
// over a trace that keep one record per live address (the undo walk's
// blocks in replay/tiling, the live allocations of replay/category's
// Classify and of explain's Walker): open addressing with linear
// probing, values inline, at most three quarters full, deletion by
// shifting the probe run back (no tombstones). Each of those walks does a
// lookup and an insert or delete per entry, a million of them on a
// 1M-entry trace, on a few thousand live addresses spread at random: a
// cache miss each. A byte per slot (empty, or 7 bits of the hash) sits in
// a separate small array that stays in cache, so a probe reads a slot
// only where its byte matches, and an absent address usually costs no
// slot read at all.
package addrmap

import (
	"iter"
	"math/rand/v2"
)

// Map maps addresses to values of type V. The zero Map is empty and ready
// to use. Pointers it returns stay valid until the next Insert, Put or
// Delete.
type Map[V any] struct {
	ctrl  []uint8 // per slot: 0 empty, else tag(hash)
	slots []slot[V]
	n     int
	bits  uint
	mult  uint64 // hash's odd multiplier, drawn at every rehash
}

type slot[V any] struct {
	key uint64
	val V
}

// minBits is the smallest table: 8 slots.
const minBits = 3

// hash is multiply-shift hashing with the table's own odd multiplier: the
// top bits of k·mult pick the home slot, the 7 below them are the slot's
// tag. A fixed multiplier (Fibonacci hashing, k times 2⁶⁴/φ, which this
// table had) lets a crafted file put every address in one probe run, each
// lookup then walking them all, quadratic in the entries: the addresses
// t·C⁻¹ all hash to t. A random odd multiplier keeps what made Fibonacci
// hashing good here — addresses in arithmetic progression, the usual
// case, spread evenly — at the same cost (one multiply; a mixing
// finalizer measured 1.5× on BenchmarkWalk), and no file can know it: for
// two given addresses the chance of a shared home slot is at most twice
// random's. The multiplier is drawn at every rehash, per table: one
// process-wide multiplier made one table's walk order (All, by slot) another's
// insertion order by home slot, which piles a growing table's keys into
// its first slots (copying a big table into a small one is quadratic).
func (m *Map[V]) hash(k uint64) uint64 { return k * m.mult }

func (m *Map[V]) home(h uint64) int { return int(h >> (64 - m.bits)) }

// tag is h's control byte: never 0 (empty).
func (m *Map[V]) tag(h uint64) uint8 { return 0x80 | uint8(h>>(56-m.bits)) }

// full reports whether n addresses are too many for a table of slots
// slots (more than three quarters full).
func full(n, slots int) bool { return 4*n > 3*slots }

// Len is the number of addresses held.
func (m *Map[V]) Len() int { return m.n }

// Reserve makes room for n addresses without growing.
func (m *Map[V]) Reserve(n int) {
	bits := uint(minBits)
	for full(n, 1<<bits) {
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
	h := m.hash(k)
	t := m.tag(h)
	mask := len(m.slots) - 1
	for i := m.home(h); ; i = (i + 1) & mask {
		switch m.ctrl[i] {
		case 0:
			return -1
		case t:
			if m.slots[i].key == k {
				return i
			}
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
	if full(m.n+1, len(m.slots)) {
		m.rehash(max(m.bits+1, minBits))
	}
	i := m.place(k)
	m.slots[i] = slot[V]{key: k}
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
	for j := (i + 1) & mask; m.ctrl[j] != 0; j = (j + 1) & mask {
		// move j back into the hole at i unless its home lies
		// cyclically in (i, j]
		h := m.home(m.hash(m.slots[j].key))
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			m.slots[i], m.ctrl[i] = m.slots[j], m.ctrl[j]
			i = j
		}
	}
	m.slots[i], m.ctrl[i] = slot[V]{}, 0
	m.n--
	return true
}

// place marks the first empty slot of k's probe run with k's tag and
// returns it (k absent, a slot free).
func (m *Map[V]) place(k uint64) int {
	h := m.hash(k)
	mask := len(m.slots) - 1
	i := m.home(h)
	for m.ctrl[i] != 0 {
		i = (i + 1) & mask
	}
	m.ctrl[i] = m.tag(h)
	return i
}

// rehash moves every address into a table of 1<<bits slots.
func (m *Map[V]) rehash(bits uint) {
	old, oldCtrl := m.slots, m.ctrl
	m.bits = bits
	m.mult = rand.Uint64() | 1
	m.slots = make([]slot[V], 1<<bits)
	m.ctrl = make([]uint8, 1<<bits)
	for k := range old {
		if oldCtrl[k] != 0 {
			m.slots[m.place(old[k].key)] = old[k]
		}
	}
}

// All yields every address and a pointer to its value, in no particular
// order; the pointers are valid while the loop makes no Insert, Put or
// Delete.
func (m *Map[V]) All() iter.Seq2[uint64, *V] {
	return func(yield func(uint64, *V) bool) {
		for i := range m.slots {
			if s := &m.slots[i]; m.ctrl[i] != 0 && !yield(s.key, &s.val) {
				return
			}
		}
	}
}
