package store

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// appendBatch builds the same pyramid as append value by value, for any
// cut of the values into batches, across level boundaries, level creation
// and dropped fronts.
func TestSeriesAppendBatchSameAsAppend(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for round := range 40 {
		n := 1 + r.IntN(40000)
		if round < 6 {
			n = []int{1, 2, 8, 9, 64, 65}[round]
		}
		xs := make([]int64, n)
		v := int64(0)
		for i := range xs {
			switch r.IntN(4) {
			case 0:
				v += r.Int64N(1000)
			case 1:
				v -= r.Int64N(1000)
			case 2: // a plateau
			default:
				v = r.Int64N(1 << 20)
			}
			xs[i] = v
		}
		var one, batch series
		drop := 0
		if round%3 == 2 {
			drop = n / 2
		}
		for i := 0; i < n; {
			m := 1 + r.IntN(3000)
			if r.IntN(4) == 0 {
				m = 1 + r.IntN(9)
			}
			m = min(m, n-i)
			for _, x := range xs[i : i+m] {
				one.append(x)
			}
			batch.appendBatch(xs[i : i+m])
			i += m
			if drop > 0 && i >= drop {
				one.dropBefore(drop)
				batch.dropBefore(drop)
				drop = 0
			}
		}
		if len(one.levels) != len(batch.levels) {
			t.Fatalf("round %d (%d values): %d levels, want %d", round, n, len(batch.levels), len(one.levels))
		}
		for l := range one.levels {
			a, b := &one.levels[l], &batch.levels[l]
			if a.Len() != b.Len() || a.lo() != b.lo() {
				t.Fatalf("round %d, level %d: %d items from %d, want %d from %d", round, l, b.Len(), b.lo(), a.Len(), a.lo())
			}
			for k := a.lo(); k < a.Len(); k++ {
				if a.at(k) != b.at(k) {
					t.Fatalf("round %d, level %d, item %d: %+v, want %+v", round, l, k, b.at(k), a.at(k))
				}
			}
		}
		for _, q := range [][2]int{{0, n}, {n / 3, n}, {n - 1, n}, {n / 2, n/2 + 77}} {
			i, j := max(q[0], batch.v.lo()), q[1]
			if i >= j {
				continue
			}
			g, gok := batch.extremes(i, j)
			w, wok := one.extremes(i, j)
			if !reflect.DeepEqual([2]any{g, gok}, [2]any{w, wok}) {
				t.Fatalf("round %d: extremes(%d, %d) = %+v, want %+v", round, i, j, g, w)
			}
		}
	}
}
