package oprange

import (
	"math"
	"sort"
)

// Note [the innermost op in O(log n)]
//
// Innermost scans from the first op whose prefix-max end reaches t to the
// last op starting by t. One long op early on (a user's "train" range, a
// ProfilerStep marker around a step's ops) makes that every op since it
// began, so a lookup per allocation (explain --by op, the holders by op,
// the profiler's operator_memory.csv) is quadratic. In Table order the
// innermost op containing t is the last op starting by t whose end reaches
// t — a later start is more inner, and among equal starts a later op ends
// no later — except that of equal intervals the first is kept. Index is a
// max tree over the ops' ends (a skipped op counts as no end), so that last
// op is found by walking up from t's last starter and down the nearest
// subtree on its left whose largest end reaches t: O(log n).

// Index finds Innermost's answer in O(log n) for a Table that it follows
// (Update after the table changes). Its zero value is an empty index.
type Index struct {
	size int     // leaves: a power of two ≥ the ops
	n    int     // ops indexed
	tree []int64 // tree[1] the root, tree[size+i] op i's end (math.MinInt64: skipped, or no op)
}

// Update makes x follow tab after its ops from index from on changed
// (added, inserted, re-sorted or dropped); Update(tab, 0) indexes it all.
// Innermost must then be given the same tab.
func (x *Index) Update(tab Table, from int) {
	n := tab.Len()
	if n > x.size {
		x.size = 1
		for x.size < n {
			x.size <<= 1
		}
		x.tree = make([]int64, 2*x.size)
		for i := range x.tree {
			x.tree[i] = math.MinInt64
		}
		from, x.n = 0, 0
	}
	from = max(0, min(from, n, x.n))
	hi := max(n, x.n) // leaves [from, hi) change
	for i := from; i < hi; i++ {
		v := int64(math.MinInt64)
		if i < n && !tab.Skip(i) {
			v = tab.End(i)
		}
		x.tree[x.size+i] = v
	}
	x.n = n
	if from >= hi {
		return
	}
	for l, r := (x.size+from)>>1, (x.size+hi-1)>>1; l >= 1; l, r = l>>1, r>>1 {
		for i := l; i <= r; i++ {
			x.tree[i] = max(x.tree[2*i], x.tree[2*i+1])
		}
	}
}

// Innermost is Innermost(tab, t) for the tab x follows.
func (x *Index) Innermost(tab Table, t int64) int {
	n := min(tab.Len(), x.n)
	k := sort.Search(n, func(i int) bool { return tab.Start(i) > t }) - 1 // the last op starting by t
	if k < 0 {
		return -1
	}
	i := x.lastReaching(k, t)
	if i < 0 {
		return -1
	}
	// of equal intervals, the first (not skipped) one is kept
	for j := i - 1; j >= 0 && tab.Start(j) == tab.Start(i) && tab.End(j) == tab.End(i); j-- {
		if !tab.Skip(j) {
			i = j
		}
	}
	return i
}

// lastReaching is the last op ≤ k whose end (not skipped) reaches t, or -1.
func (x *Index) lastReaching(k int, t int64) int {
	v := x.size + k
	if x.tree[v] >= t {
		return k
	}
	for ; v > 1; v >>= 1 {
		if v&1 == 1 && x.tree[v-1] >= t { // the subtree just left of what is covered
			v--
			for v < x.size {
				if v = 2*v + 1; x.tree[v] < t {
					v--
				}
			}
			return v - x.size
		}
	}
	return -1
}

// Interval is Interval(tab, lo, hi) for the tab x follows.
func (x *Index) Interval(tab Table, lo, hi int64) int {
	return interval(tab, min(tab.Len(), x.n), lo, hi, func(t int64) int { return x.Innermost(tab, t) })
}
