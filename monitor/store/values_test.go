package store

import (
	"math"
	"math/rand/v2"
	"testing"
)

// valuesGen returns n values in chunk-sized stretches of different kinds:
// byte totals (a block size up or down per value), constant, spanning
// just under and just over 2³² (the packed and plain sides of the limit),
// and anything at all, int64's extremes included; some stretches are
// odd multiples of a power of two, some not (narrow chunks' shift).
func valuesGen(r *rand.Rand, n int) []int64 {
	xs := make([]int64, n)
	var v int64
	kind := 0
	for i := range xs {
		if i%chunkLen == 0 || r.IntN(20000) == 0 {
			kind = r.IntN(9)
		}
		switch kind {
		case 0: // byte totals: blocks of 512-byte multiples
			v += (r.Int64N(1<<19) - 1<<18) &^ 511
		case 1: // constant
		case 6: // small steps of any size
			v += r.Int64N(2001) - 1000
		case 7: // large steps: 4 bytes or plain
			v += r.Int64N(1<<30) - 1<<29
		case 8: // a group spanning 2¹⁶ to 2¹⁷ multiples of 512: 2 bytes do not do
			v = 1<<40 + r.Int64N(2)*(1<<16+r.Int64N(1<<16))*512 + r.Int64N(4)*512
		case 2: // within 2³² of a far base
			v = math.MaxInt64 - r.Int64N(1<<32)
		case 3: // spanning 2³² to 2³³: 4 bytes do not do
			v = math.MinInt64 + r.Int64N(2)*(1<<32+r.Int64N(1<<32)) + r.Int64N(1000)
		case 4:
			v = int64(r.Uint64())
		default:
			v = []int64{math.MinInt64, math.MaxInt64, 0, -1}[r.IntN(4)]
		}
		xs[i] = v
	}
	return xs
}

// TestValuesAgreeWithSlice: a values answers as the plain slice of the same
// values (at, last, each, extremes) through appends one by one and in runs,
// set (values that leave their chunk's packed range included), update,
// dropped fronts and reused chunks, with chunks narrow, packed and plain.
func TestValuesAgreeWithSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 29))
	narrow, packed, plain := 0, 0, 0
	for round := range 60 {
		n := []int{0, 1, 15, chunkLen, chunkLen + 1, 3*chunkLen + 17, 9 * chunkLen}[round%7]
		xs := valuesGen(r, n)
		var v values
		if round%4 == 1 {
			v.reserve(n)
		}
		var want []int64
		lo := 0
		check := func(what string) {
			t.Helper()
			if v.Len() != len(want) || v.lo() > lo {
				t.Fatalf("round %d, %s: len %d from %d, want %d from ≤ %d", round, what, v.Len(), v.lo(), len(want), lo)
			}
			if len(want) > 0 && v.last() != want[len(want)-1] {
				t.Fatalf("round %d, %s: last %d, want %d", round, what, v.last(), want[len(want)-1])
			}
			for i := v.lo(); i < len(want); i++ {
				if v.at(i) != want[i] {
					t.Fatalf("round %d, %s: at(%d) = %d, want %d", round, what, i, v.at(i), want[i])
				}
			}
			for range 20 {
				if len(want) == v.lo() {
					break
				}
				i := v.lo() + r.IntN(len(want)-v.lo())
				j := i + 1 + r.IntN(len(want)-i)
				k := i
				v.each(i, j, func(p []int64) {
					for _, x := range p {
						if x != want[k] {
							t.Fatalf("round %d, %s: each(%d, %d) at %d: %d, want %d", round, what, i, j, k, x, want[k])
						}
						k++
					}
				})
				if k != j {
					t.Fatalf("round %d, %s: each(%d, %d) gave %d values", round, what, i, j, k-i)
				}
				gl, gh := v.extremes(i, j, want[i], want[i])
				wl, wh := want[i], want[i]
				for _, x := range want[i:j] {
					wl, wh = min(wl, x), max(wh, x)
				}
				if gl != wl || gh != wh {
					t.Fatalf("round %d, %s: extremes(%d, %d) = %d, %d, want %d, %d", round, what, i, j, gl, gh, wl, wh)
				}
			}
		}
		for i := 0; i < n; {
			if r.IntN(3) == 0 {
				v.append(xs[i])
				want = append(want, xs[i])
				i++
			} else {
				m := min(n-i, 1+r.IntN(3000))
				v.appendAll(xs[i : i+m])
				want = append(want, xs[i:i+m]...)
				i += m
			}
			if r.IntN(8) == 0 && len(want) > lo {
				j := lo + r.IntN(len(want)-lo)
				x := xs[r.IntN(n)]
				if r.IntN(2) == 0 {
					x = want[j] + r.Int64N(3) - 1
				}
				v.set(j, x)
				want[j] = x
			}
			if round%3 == 2 && r.IntN(6) == 0 {
				lo = max(lo, r.IntN(len(want)+1))
				v.dropBefore(lo)
			}
		}
		for _, c := range v.chunks {
			if c.nar != nil {
				narrow++
			} else if c.off != nil {
				packed++
			} else if len(c.wide) == chunkLen {
				plain++
			}
		}
		for range 300 { // set anywhere: in and out of a packed chunk's range and shift
			if len(want) == lo {
				break
			}
			j := lo + r.IntN(len(want)-lo)
			x := want[j] + []int64{-1, 1, 512, -512, 1 << 26, 1 << 32, 1 << 33}[r.IntN(7)]
			v.set(j, x)
			want[j] = x
		}
		check("appended")
		d := r.Int64N(1 << 40)
		v.update(func(from int, p []int64) {
			for j := range p {
				if r.IntN(100) == 0 {
					p[j] = int64(r.Uint64())
				} else {
					p[j] += d
				}
				want[from+j] = p[j]
			}
		})
		check("updated")
		// the window turns over: appends after drops reuse the buffers
		for range 3 * chunkLen {
			x := r.Int64N(1 << 20)
			if len(want) > 0 {
				x += want[len(want)-1]
			}
			v.append(x)
			want = append(want, x)
		}
		lo = len(want) - chunkLen/2
		v.dropBefore(lo)
		check("turned over")
	}
	if narrow == 0 || packed == 0 || plain == 0 {
		t.Fatalf("full chunks: %d narrow, %d packed, %d plain: every kind must be exercised", narrow, packed, plain)
	}
	t.Logf("full chunks: %d narrow, %d packed, %d plain", narrow, packed, plain)
}

// TestSeriesWideValues: a series whose values need every width (chunks
// that cannot be packed, int64's extremes) answers extremes and
// firstAtLeast as a scan of its values does, built value by value, by
// batches, or in bulk.
func TestSeriesWideValues(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for round := range 12 {
		n := 1 + r.IntN(6*chunkLen*fanout)
		if round < 4 {
			n = 1 + r.IntN(3*chunkLen)
		}
		xs := valuesGen(r, n)
		var one, batch, bulk series
		for _, x := range xs {
			one.append(x)
			bulk.bulk(x)
		}
		bulk.reindex()
		for i := 0; i < n; {
			m := min(n-i, 1+r.IntN(2000))
			batch.appendBatch(xs[i : i+m])
			i += m
		}
		for q := range 300 {
			i := r.IntN(n)
			j := i + 1 + r.IntN(n-i)
			if q%10 == 0 {
				i, j = 0, n
			}
			w := MinMax{xs[i], xs[i]}
			for _, x := range xs[i:j] {
				w.Min, w.Max = min(w.Min, x), max(w.Max, x)
			}
			x := xs[r.IntN(n)]
			wf := -1
			for k := i; k < j; k++ {
				if xs[k] >= x {
					wf = k
					break
				}
			}
			for name, s := range map[string]*series{"append": &one, "appendBatch": &batch, "bulk": &bulk} {
				if g, ok := s.extremes(i, j); !ok || g != w {
					t.Fatalf("round %d, %s: extremes(%d, %d) = %+v, want %+v", round, name, i, j, g, w)
				}
				if g := s.firstAtLeast(i, j, x); g != wf {
					t.Fatalf("round %d, %s: firstAtLeast(%d, %d, %d) = %d, want %d", round, name, i, j, x, g, wf)
				}
				if k := i + r.IntN(j-i); s.at(k) != xs[k] {
					t.Fatalf("round %d, %s: at(%d) = %d, want %d", round, name, k, s.at(k), xs[k])
				}
			}
		}
	}
}

// TestStatedTotalsPacked: stated totals (a profiler's memory records)
// replace the first entries' active and allocated bytes, chunk by chunk;
// the series then read the stated values there and the trace's after,
// extremes and firstAtLeast included, whatever widths the stated values
// need.
func TestStatedTotalsPacked(t *testing.T) {
	const m = 12000
	plain, stated := New(Options{}), New(Options{})
	snap := genCapture(3, 20000, true) // not twice: its map's order varies
	n := len(snap.DeviceTraces[0])
	if err := plain.IngestSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 9))
	act, alloc := valuesGen(r, m), valuesGen(r, m)
	dt := DeviceTotals{OK: true, After: make([]Totals, m)}
	for i := range dt.After {
		dt.After[i] = Totals{Active: act[i], Allocated: alloc[i]}
	}
	if err := stated.IngestStated(snap, []DeviceTotals{dt}); err != nil {
		t.Fatal(err)
	}
	pd, sd := plain.devs[0], stated.devs[0]
	if sd.active.v.Len() != n {
		t.Fatalf("%d values, want %d", sd.active.v.Len(), n)
	}
	wantA, wantL := make([]int64, n), make([]int64, n)
	for i := range n {
		wantA[i], wantL[i] = pd.active.at(i), pd.allocated.at(i)
		if i < m {
			wantA[i], wantL[i] = act[i], alloc[i]
		}
	}
	for name, c := range map[string]struct {
		s    *series
		want []int64
	}{"active": {&sd.active, wantA}, "allocated": {&sd.allocated, wantL}} {
		for i, w := range c.want {
			if g := c.s.at(i); g != w {
				t.Fatalf("%s at %d: %d, want %d", name, i, g, w)
			}
		}
		for range 200 {
			i := r.IntN(n)
			j := i + 1 + r.IntN(n-i)
			w := MinMax{c.want[i], c.want[i]}
			for _, x := range c.want[i:j] {
				w.Min, w.Max = min(w.Min, x), max(w.Max, x)
			}
			if g, _ := c.s.extremes(i, j); g != w {
				t.Fatalf("%s extremes(%d, %d) = %+v, want %+v", name, i, j, g, w)
			}
		}
	}
}
