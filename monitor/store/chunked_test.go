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
