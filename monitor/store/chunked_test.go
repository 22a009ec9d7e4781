package store

import (
	"slices"
	"sort"
	"testing"
)

// TestChunked checks the chunked sequence against a plain slice across
// chunk boundaries: at, ptr, set, last, each and search.
func TestChunked(t *testing.T) {
	var c chunked[int64]
	var ref []int64
	if c.last() != 0 || c.Len() != 0 {
		t.Fatal("empty sequence is not empty")
	}
	for i := range 3*chunkLen + 17 {
		c.append(int64(2 * i))
		ref = append(ref, int64(2*i))
	}
	if c.Len() != len(ref) || c.last() != ref[len(ref)-1] {
		t.Fatalf("Len %d last %d, want %d %d", c.Len(), c.last(), len(ref), ref[len(ref)-1])
	}
	for _, i := range []int{0, 1, chunkLen - 1, chunkLen, 2*chunkLen + 5, len(ref) - 1} {
		if c.at(i) != ref[i] || *c.ptr(i) != ref[i] {
			t.Fatalf("at(%d) = %d, want %d", i, c.at(i), ref[i])
		}
	}
	c.set(chunkLen, -1)
	ref[chunkLen] = -1
	for _, r := range [][2]int{{0, 0}, {0, len(ref)}, {5, chunkLen}, {chunkLen - 3, chunkLen + 3}, {chunkLen, 2 * chunkLen}, {7, 3*chunkLen + 1}} {
		var got []int64
		c.each(r[0], r[1], func(p []int64) { got = append(got, p...) })
		if !slices.Equal(got, ref[r[0]:r[1]]) {
			t.Fatalf("each(%d, %d): %d values, want %d", r[0], r[1], len(got), r[1]-r[0])
		}
	}
	ref[chunkLen] = int64(2 * chunkLen)
	c.set(chunkLen, ref[chunkLen])
	for _, x := range []int64{-5, 0, 1, 2 * chunkLen, 2*chunkLen + 1, 1 << 40} {
		want := sort.Search(len(ref), func(i int) bool { return ref[i] >= x })
		if got := c.search(func(v *int64) bool { return *v >= x }); got != want {
			t.Fatalf("search(%d) = %d, want %d", x, got, want)
		}
		wantFrom := max(want, 100)
		if got := c.searchFrom(100, func(v *int64) bool { return *v >= x }); got != wantFrom {
			t.Fatalf("searchFrom(100, %d) = %d, want %d", x, got, wantFrom)
		}
	}
}

// TestChunkedRecycles: chunks dropped from the front come back as the
// chunks appended next (no new allocation once a window turns over,
// the first chunk included), and a recycled chunk shows only what was
// appended into it, never what it held before, also while partly filled.
func TestChunkedRecycles(t *testing.T) {
	var c chunked[int64]
	dropped := map[*int64]bool{}
	fresh := 0
	for i := range 20*chunkLen + 100 {
		if i%chunkLen == 0 && i > 0 {
			if ch := c.chunks[len(c.chunks)-1]; cap(ch) != chunkLen {
				t.Fatalf("chunk before %d has cap %d, want %d", i, cap(ch), chunkLen)
			}
		}
		c.append(int64(i))
		if i%chunkLen == 0 && i > 0 { // a chunk was just started
			if p := &c.chunks[len(c.chunks)-1][:1][0]; dropped[p] {
				delete(dropped, p)
			} else if i >= 3*chunkLen {
				fresh++
			}
		}
		// keep a window of two chunks and the one being filled
		if to := i + 1 - 2*chunkLen; i%chunkLen == chunkLen-1 && to > 0 {
			for k := c.skip; k < to>>chunkBits; k++ {
				dropped[&c.chunks[k-c.skip][:1][0]] = true
			}
			c.dropBefore(to)
			if c.lo() != to {
				t.Fatalf("lo %d after dropBefore(%d)", c.lo(), to)
			}
		}
		// everything held reads back as appended, the partly filled chunk too
		if i%997 == 0 || i%chunkLen < 3 {
			for j := c.lo(); j < c.Len(); j += 61 {
				if c.at(j) != int64(j) {
					t.Fatalf("after %d appends: at(%d) = %d", i+1, j, c.at(j))
				}
			}
			var got []int64
			c.each(c.lo(), c.Len(), func(p []int64) { got = append(got, p...) })
			if len(got) != c.Len()-c.lo() {
				t.Fatalf("each over [%d, %d): %d values", c.lo(), c.Len(), len(got))
			}
			for k, v := range got {
				if v != int64(c.lo()+k) {
					t.Fatalf("after %d appends: each gives %d at %d", i+1, v, c.lo()+k)
				}
			}
			if c.last() != int64(i) {
				t.Fatalf("last %d, want %d", c.last(), i)
			}
		}
	}
	if fresh > 0 {
		t.Fatalf("%d chunks allocated after the window turned over, want all reused", fresh)
	}
}

// appendAll leaves what the same values appended one by one leave, in
// runs of every length across chunk boundaries, on a fresh sequence, a
// reserved one and one whose front was dropped (its spare chunks reused).
func TestChunkedAppendAll(t *testing.T) {
	for _, start := range []string{"fresh", "reserved", "dropped"} {
		var a, b chunked[int64]
		if start == "reserved" {
			a.reserve(100)
			b.reserve(100)
		}
		var x int64
		for run := 0; a.Len() < 5*chunkLen; run++ {
			xs := make([]int64, (run*37)%(chunkLen+300))
			for i := range xs {
				x++
				xs[i] = x
			}
			a.appendAll(xs)
			for _, v := range xs {
				b.append(v)
			}
			if start == "dropped" && run%5 == 4 {
				a.dropBefore(a.Len() - 10)
				b.dropBefore(b.Len() - 10)
			}
		}
		if a.Len() != b.Len() || a.lo() != b.lo() || len(a.chunks) != len(b.chunks) {
			t.Fatalf("%s: Len %d / %d, lo %d / %d, chunks %d / %d", start, a.Len(), b.Len(), a.lo(), b.lo(), len(a.chunks), len(b.chunks))
		}
		for i, ch := range a.chunks {
			if i < len(a.chunks)-1 && len(ch) != chunkLen {
				t.Fatalf("%s: chunk %d holds %d", start, i, len(ch))
			}
		}
		for i := a.lo(); i < a.Len(); i++ {
			if a.at(i) != b.at(i) || a.at(i) != int64(i+1) {
				t.Fatalf("%s: element %d: %d / %d", start, i, a.at(i), b.at(i))
			}
		}
	}
}
