package oprange

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomOps is a table of n ops in Table order: nested and overlapping
// ranges, some long, some of zero length, some equal, some steps.
func randomOps(r *rand.Rand, n int) opTab {
	t := make(opTab, n)
	for i := range t {
		s := r.Int64N(1000)
		var e int64
		switch r.IntN(4) {
		case 0:
			e = s // an instant
		case 1:
			e = s + r.Int64N(1000) // long
		default:
			e = s + r.Int64N(30)
		}
		t[i].s, t[i].e, t[i].step = s, e, r.IntN(6) == 0
		if i > 0 && r.IntN(8) == 0 { // an equal interval
			t[i].s, t[i].e = t[i-1].s, t[i-1].e
		}
	}
	slices.SortStableFunc(t, func(a, b struct {
		s, e int64
		step bool
	}) int {
		return cmp.Or(cmp.Compare(a.s, b.s), cmp.Compare(b.e, a.e))
	})
	return t
}

// TestIndexMatchesInnermost: the index gives Innermost's and Interval's
// answers at every time, as the table grows, is re-sorted from a point
// and shrinks.
func TestIndexMatchesInnermost(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(tab opTab, x *Index, what string) {
		t.Helper()
		for tm := int64(-1); tm <= 2100; tm++ {
			if got, want := x.Innermost(tab, tm), Innermost(tab, tm); got != want {
				t.Fatalf("%s, %d ops, t=%d: index %d, Innermost %d", what, len(tab), tm, got, want)
			}
		}
		for range 200 {
			lo := r.Int64N(1100)
			hi := lo + r.Int64N(50)
			if r.IntN(4) == 0 {
				hi = 0
			}
			if got, want := x.Interval(tab, lo, hi), Interval(tab, lo, hi); got != want {
				t.Fatalf("%s, (%d, %d): index %d, Interval %d", what, lo, hi, got, want)
			}
		}
	}
	rounds := 30
	if testing.Short() {
		rounds = 15
	}
	for round := range rounds {
		n := 1 + r.IntN(300)
		all := randomOps(r, n)
		var x Index
		// grown in pieces, as the Store appends
		for m := 0; m < n; {
			m = min(n, m+1+r.IntN(40))
			x.Update(all[:m], max(0, m-40))
			check(all[:m], &x, "grown")
		}
		// re-sorted from a point: ops changed after it
		from := r.IntN(n)
		changed := slices.Clone(all)
		tail := randomOps(r, n-from)
		for i := range tail {
			tail[i].s += 1000 // still in order after the kept head
		}
		copy(changed[from:], tail)
		x.Update(changed, from)
		check(changed, &x, "re-sorted")
		// shrunk (retention drops the oldest; the index is rebuilt)
		if round%2 == 0 {
			short := changed[n/2:]
			x.Update(short, 0)
			check(short, &x, "shrunk")
		}
	}
}

// TestIndexEmpty: an index of nothing finds nothing.
func TestIndexEmpty(t *testing.T) {
	var x Index
	if x.Innermost(opTab{}, 5) != -1 || x.Interval(opTab{}, 1, 9) != -1 {
		t.Fatal("an empty index found an op")
	}
	x.Update(opTab{}, 0)
	if x.Innermost(opTab{}, 5) != -1 {
		t.Fatal("an empty index found an op")
	}
}

// BenchmarkInnermostEnclosed: one op encloses 100,000 others (a user's
// "train" range); a lookup between them by the scan and by the index.
func BenchmarkInnermostEnclosed(b *testing.B) {
	const n = 100_000
	tab := opTab{{0, 10 * n, false}}
	for i := range int64(n) {
		tab = append(tab, struct {
			s, e int64
			step bool
		}{10 * i, 10*i + 5, false})
	}
	ends := make([]int64, len(tab))
	for i := range tab {
		ends[i] = max(tab[i].e, ends[max(i-1, 0)])
	}
	sorted := maxEndTab{tab, ends}
	var x Index
	x.Update(sorted, 0)
	probe := int64(10*n - 3) // between the last ops: only the enclosing one holds it
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if Innermost(sorted, probe) != 0 {
				b.Fatal("wrong op")
			}
		}
	})
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if x.Innermost(sorted, probe) != 0 {
				b.Fatal("wrong op")
			}
		}
	})
}

// maxEndTab is an opTab with its prefix-max ends precomputed.
type maxEndTab struct {
	opTab
	ends []int64
}

func (t maxEndTab) MaxEnd(i int) int64 { return t.ends[i] }
