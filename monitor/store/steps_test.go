package store

import (
	"math/rand/v2"
	"testing"
)

// A steps answers as the plain series of the same values: at, extremes,
// firstAtLeast and walk, built by append, appendBatch or bulk + reindex,
// across dropped fronts, dense and rare changes.
func TestStepsAgreeWithSeries(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	for round := range 80 {
		n := 1 + r.IntN(30000)
		if round < 6 {
			n = []int{1, 2, 8, 9, chunkLen, chunkLen + 1}[round]
		}
		// how often the value changes: always, often, rarely, never
		rate := []int{1, 3, 500, 1 << 30}[round%4]
		xs := make([]int64, n)
		v := r.Int64N(1 << 30)
		for i := range xs {
			if r.IntN(rate) == 0 {
				switch r.IntN(3) {
				case 0:
					v += r.Int64N(1 << 20)
				case 1:
					v -= r.Int64N(1 << 20)
				default:
					v += 0 // a "change" to the same value
				}
			}
			xs[i] = v
		}
		var plain series
		var st steps
		how := round / 4 % 4 // append, appendBatch, bulk, or append and appendBatch mixed (a live log's markers)
		drop, lo := -1, 0
		if round%3 == 2 && how != 2 { // bulk is a capture's: never thinned
			drop = r.IntN(n)
			lo = drop // values before the drop are not read (the Store reads from d.off)
		}
		for i := 0; i < n; {
			m := min(1+r.IntN(3000), n-i)
			switch how {
			case 0:
				for _, x := range xs[i : i+m] {
					st.append(x)
				}
			case 1:
				st.appendBatch(xs[i : i+m])
			case 3:
				if r.IntN(2) == 0 {
					m = min(1+r.IntN(3), m)
					for _, x := range xs[i : i+m] {
						st.append(x)
					}
				} else {
					st.appendBatch(xs[i : i+m])
				}
			default:
				for _, x := range xs[i : i+m] {
					st.bulk(x)
				}
			}
			for _, x := range xs[i : i+m] {
				plain.append(x)
			}
			i += m
			if drop >= 0 && i > drop {
				st.dropBefore(drop)
				plain.dropBefore(drop)
				drop = -1
			}
		}
		if how == 2 {
			st.reindex()
		}
		if len(xs) > 1 && st.vals.v.Len() > len(xs)/2+1 && rate > 3 {
			t.Fatalf("round %d: %d changes kept for %d values", round, st.vals.v.Len(), len(xs))
		}
		w := st.walk(lo)
		for i := lo; i < n; i++ {
			if got := st.at(i); got != xs[i] {
				t.Fatalf("round %d (%d values, how %d): at(%d) = %d, want %d", round, n, how, i, got, xs[i])
			}
			if got := w.value(); got != xs[i] {
				t.Fatalf("round %d: walk at %d = %d, want %d", round, i, got, xs[i])
			}
		}
		for range 200 {
			i := lo + r.IntN(n-lo)
			j := i + r.IntN(n-i+1)
			if r.IntN(8) == 0 {
				j = n + 5
			}
			g, gok := st.extremes(i, j)
			want, wok := plain.extremes(i, j)
			if g != want || gok != wok {
				t.Fatalf("round %d: extremes(%d, %d) = %+v %v, want %+v %v", round, i, j, g, gok, want, wok)
			}
			x := xs[i+r.IntN(min(j, n)-i+1)%max(min(j, n)-i, 1)] + r.Int64N(3) - 1
			if got, want := st.firstAtLeast(i, j, x), plain.firstAtLeast(i, j, x); got != want {
				t.Fatalf("round %d: firstAtLeast(%d, %d, %d) = %d, want %d", round, i, j, x, got, want)
			}
		}
	}
}

// replaced and addAll change the values as the stated path needs.
func TestStepsReplaced(t *testing.T) {
	var st steps
	for _, x := range []int64{1, 1, 2, 2, 2, 3} {
		st.bulk(x)
	}
	st.addAll(10)
	got := st.replaced([]Totals{{Reserved: 11}, {Reserved: 5}, {Reserved: 5}})
	got.reindex()
	want := []int64{11, 5, 5, 12, 12, 13}
	for i, x := range want {
		if got.at(i) != x {
			t.Fatalf("at(%d) = %d, want %d", i, got.at(i), x)
		}
	}
	if got.vals.v.Len() != 4 {
		t.Fatalf("%d changes, want 4", got.vals.v.Len())
	}
}
