package store

import (
	"math"
	"math/rand/v2"
	"testing"
)

// positions reads back what a plain slice holds, and below answers as a
// linear count, across chunk boundaries, dropped fronts and chunks that
// cannot be packed (gaps past 2³² inside one chunk).
func TestPositionsAgreeWithSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 11))
	widened := 0
	for round := range 30 {
		n := 1 + r.IntN(20000)
		if round < 4 {
			n = []int{1, chunkLen, chunkLen + 1, 3 * chunkLen}[round]
		}
		var p positions
		var plain []int64
		x := int64(r.IntN(3))
		if round%5 == 4 {
			x = math.MaxUint32 * 3 // positions past 2³² from the start
		}
		dropAt, dropTo := -1, 0
		if round%3 == 1 {
			dropAt, dropTo = n*2/3, n/2
		}
		for i := range n {
			switch g := r.IntN(1000); {
			case round%4 == 3 && g == 0:
				x += math.MaxUint32 + int64(r.IntN(10)) // too far for an offset
			case g < 100:
				x += 1 + int64(r.IntN(100000))
			default:
				x += 1 + int64(r.IntN(3))
			}
			p.append(x)
			plain = append(plain, x)
			if i == dropAt {
				p.dropBefore(dropTo)
			}
		}
		for _, c := range p.v.chunks {
			if c.nar == nil && c.off == nil && len(c.wide) == chunkLen && &c.wide[0] != &p.v.chunks[len(p.v.chunks)-1].wide[0] {
				widened++ // a full chunk left plain
			}
		}
		if p.Len() != len(plain) {
			t.Fatalf("round %d: Len %d, want %d", round, p.Len(), len(plain))
		}
		lo := p.lo()
		if dropAt < 0 && lo != 0 || lo > dropTo && dropAt >= 0 {
			t.Fatalf("round %d: lo %d (dropped before %d)", round, lo, dropTo)
		}
		for i := lo; i < len(plain); i++ {
			if p.at(i) != plain[i] {
				t.Fatalf("round %d: at(%d) = %d, want %d", round, i, p.at(i), plain[i])
			}
		}
		for range 300 {
			q := plain[lo+r.IntN(len(plain)-lo)] + int64(r.IntN(3)) - 1
			if r.IntN(10) == 0 {
				q = int64(r.IntN(3)) - 1
			}
			want := lo
			for want < len(plain) && plain[want] < q {
				want++
			}
			if got := p.below(q); got != want {
				t.Fatalf("round %d: below(%d) = %d, want %d", round, q, got, want)
			}
		}
		if got := p.below(plain[len(plain)-1] + 1); got != len(plain) {
			t.Fatalf("round %d: below(past the end) = %d, want %d", round, got, len(plain))
		}
	}
	if widened == 0 {
		t.Fatal("no full chunk left plain")
	}
}
