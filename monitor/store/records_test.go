package store

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/npumon/npumon/allocator/snapshot"
)

// records give back the records appended, by at, ptr, action and each,
// across chunks and a dropped front; a body has no padding.
func TestRecordsAgreeWithSlice(t *testing.T) {
	if s := unsafe.Sizeof(recBody{}); s != 32 {
		t.Fatalf("a record body takes %d bytes, want 32", s)
	}
	r := rand.New(rand.NewPCG(2, 17))
	for round := range 12 {
		n := 1 + r.IntN(3*chunkLen)
		var rs records
		if round%2 == 0 {
			rs.reserve(n)
		}
		plain := make([]rec, n)
		for i := range plain {
			plain[i] = rec{time: int64(i), addr: r.Uint64(), size: r.Int64(), frames: snapshot.StackID(r.Int32()),
				attr: r.Uint32(), action: snapshot.Action(r.UintN(256))}
			rs.append(plain[i])
		}
		lo := 0
		if round%3 == 2 {
			lo = r.IntN(n)
			rs.dropBefore(lo)
			lo = rs.lo()
		}
		if rs.Len() != n || rs.last() != plain[n-1] {
			t.Fatalf("round %d: Len %d, last %+v; want %d, %+v", round, rs.Len(), rs.last(), n, plain[n-1])
		}
		for i := lo; i < n; i++ {
			if rs.at(i) != plain[i] || rs.action(i) != plain[i].action || rs.ptr(i).with(plain[i].action) != plain[i] {
				t.Fatalf("round %d: record %d is %+v, want %+v", round, i, rs.at(i), plain[i])
			}
		}
		i := lo + r.IntN(n-lo)
		k := i
		rs.each(i, n, func(p []recBody, acts []snapshot.Action) {
			if len(p) != len(acts) {
				t.Fatalf("round %d: a piece of %d bodies and %d actions", round, len(p), len(acts))
			}
			for j := range p {
				if p[j].with(acts[j]) != plain[k] {
					t.Fatalf("round %d: each gave %+v at %d, want %+v", round, p[j].with(acts[j]), k, plain[k])
				}
				k++
			}
		})
		if k != n {
			t.Fatalf("round %d: each from %d stopped at %d of %d", round, i, k, n)
		}
	}
}
