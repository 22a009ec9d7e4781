package acl

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func checkMap(t *testing.T, m *freeMap, base, size uint64, used []bool) {
	t.Helper()
	var free uint64
	for i, r := range m.free {
		if r.start >= r.end || r.start < base || r.end > base+size {
			t.Fatalf("range %d %+v invalid", i, r)
		}
		if i > 0 && m.free[i-1].end >= r.start {
			t.Fatalf("ranges %d,%d overlap or touch: %+v %+v", i-1, i, m.free[i-1], r)
		}
		for a := r.start; a < r.end; a++ {
			if used[a-base] {
				t.Fatalf("unit %d is used but listed free", a-base)
			}
		}
		free += r.end - r.start
	}
	var want uint64
	for _, u := range used {
		if !u {
			want++
		}
	}
	if free != want {
		t.Fatalf("free %d, model %d", free, want)
	}
}

// TestFreeMapModel drives the map with random takes and releases and checks
// it against a unit bitmap: sorted, disjoint, coalesced, first fit.
func TestFreeMapModel(t *testing.T) {
	const base, size = 1000, 256
	rng := rand.New(rand.NewPCG(1, 2))
	m := newFreeMap(base, size)
	used := make([]bool, size)
	type blk struct{ a, n uint64 }
	var live []blk
	for step := range 5000 {
		if len(live) > 0 && rng.IntN(2) == 0 {
			i := rng.IntN(len(live))
			b := live[i]
			live = append(live[:i], live[i+1:]...)
			m.release(b.a, b.n)
			for u := b.a; u < b.a+b.n; u++ {
				used[u-base] = false
			}
		} else {
			n := uint64(rng.IntN(24) + 1)
			align := uint64(1) << rng.IntN(4)
			a, ok := m.find(n, align)
			// Model first fit: lowest aligned start with n free units.
			var wantA uint64
			wantOK := false
			for s := alignUp(base, align); s+n <= base+size && !wantOK; s += align {
				fits := true
				for u := s; u < s+n; u++ {
					if used[u-base] {
						fits = false
						break
					}
				}
				if fits {
					wantA, wantOK = s, true
				}
			}
			if ok != wantOK || (ok && a != wantA) {
				t.Fatalf("step %d: find(%d, %d) = %d, %v; model %d, %v", step, n, align, a, ok, wantA, wantOK)
			}
			if ok {
				if !m.isFree(a, n) {
					t.Fatalf("step %d: found range not free", step)
				}
				m.take(a, n)
				for u := a; u < a+n; u++ {
					used[u-base] = true
				}
				live = append(live, blk{a, n})
			}
		}
		checkMap(t, &m, base, size, used)
	}
	for _, b := range live {
		m.release(b.a, b.n)
	}
	if len(m.free) != 1 || m.free[0] != (span{base, base + size}) || m.largest() != size {
		t.Fatalf("after releasing everything: %+v", m.free)
	}
}

func TestFreeMapIsFree(t *testing.T) {
	m := newFreeMap(0, 100)
	m.take(10, 10)
	for i, c := range []struct {
		a, n uint64
		want bool
	}{{0, 10, true}, {0, 11, false}, {10, 1, false}, {19, 1, false}, {20, 80, true}, {20, 81, false}, {100, 1, false}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := m.isFree(c.a, c.n); got != c.want {
				t.Errorf("isFree(%d, %d) = %v", c.a, c.n, got)
			}
		})
	}
}
