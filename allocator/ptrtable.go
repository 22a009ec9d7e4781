package allocator

import "math/bits"

// ptrTable maps the address of an active block to the block: an
// open-addressing hash table with linear probing and backward-shift
// deletion. Free needs this lookup on every call; the table costs a
// fraction of a Go map's insert+lookup+delete. Addresses are never 0, so
// 0 marks an empty slot.
type ptrTable struct {
	keys  []uint64
	vals  []*block
	n     int
	shift uint // 64 − log2(len(keys))
}

func (t *ptrTable) slot(k uint64) int {
	// Fibonacci hashing of the 512-byte granule: consecutive blocks spread.
	return int(((k >> 9) * 0x9E3779B97F4A7C15) >> t.shift)
}

func (t *ptrTable) get(k uint64) *block {
	if t.n == 0 {
		return nil
	}
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.vals[i]
		case 0:
			return nil
		}
	}
}

func (t *ptrTable) put(k uint64, v *block) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			t.vals[i] = v
			return
		case 0:
			t.keys[i], t.vals[i] = k, v
			t.n++
			return
		}
	}
}

func (t *ptrTable) del(k uint64) {
	if t.n == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.slot(k)
	for t.keys[i] != k {
		if t.keys[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Shift later members of the probe run back so lookups never stop
	// early at the hole.
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		h := t.slot(t.keys[j])
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i], t.vals[i] = 0, nil
	t.n--
}

func (t *ptrTable) grow() {
	size := max(64, 2*len(t.keys))
	old, oldVals := t.keys, t.vals
	t.keys, t.vals, t.n = make([]uint64, size), make([]*block, size), 0
	t.shift = uint(64 - (bits.Len64(uint64(size)) - 1))
	for i, k := range old {
		if k != 0 {
			t.put(k, oldVals[i])
		}
	}
}

func (t *ptrTable) len() int { return t.n }

// each calls fn for every block.
func (t *ptrTable) each(fn func(*block)) {
	for i, k := range t.keys {
		if k != 0 {
			fn(t.vals[i])
		}
	}
}
