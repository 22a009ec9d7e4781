package category

import (
	"math/rand/v2"
	"testing"
)

// TestAddrTable checks the open-addressing table against a map over
// random inserts, lookups and deletions of clustered keys (addresses
// 512 bytes apart, and colliding home slots).
func TestAddrTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tb addrTable
	ref := map[uint64]int32{}
	key := func() uint64 { return uint64(r.IntN(3000)) * 512 }
	for step := range 200000 {
		k := key()
		switch r.IntN(3) {
		case 0:
			if _, ok := ref[k]; !ok {
				v := int32(step)
				tb.insert(k).a.idx = v
				ref[k] = v
			}
		case 1:
			if _, ok := ref[k]; ok {
				tb.del(k)
				delete(ref, k)
			}
		}
		sl := tb.find(k)
		v, ok := ref[k]
		if (sl != nil) != ok || (ok && (sl.a.idx != v || !sl.a.used)) {
			t.Fatalf("step %d key %d: table %v, map %d %v", step, k, sl, v, ok)
		}
		if tb.n != len(ref) {
			t.Fatalf("step %d: %d keys, map %d", step, tb.n, len(ref))
		}
	}
	for k, v := range ref {
		if sl := tb.find(k); sl == nil || sl.a.idx != v {
			t.Fatalf("key %d: %v, want %d", k, sl, v)
		}
	}
}
