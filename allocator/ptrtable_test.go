package allocator

import (
	"math/rand/v2"
	"testing"
)

// TestPtrTableMatchesMap compares the table with a Go map under random
// inserts and deletes of clustered addresses (long probe runs, wrap-around).
func TestPtrTableMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab ptrTable
	ref := map[uint64]*block{}
	var keys []uint64
	for step := range 200_000 {
		if len(keys) > 0 && rng.IntN(100) < 45 {
			i := rng.IntN(len(keys))
			k := keys[i]
			keys[i] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			tab.del(k)
			delete(ref, k)
		} else {
			k := 0x1000_0000_0000 + uint64(rng.IntN(1<<14))*512
			b := &block{ptr: k}
			if _, ok := ref[k]; !ok {
				keys = append(keys, k)
			}
			tab.put(k, b)
			ref[k] = b
		}
		if step%997 == 0 {
			if tab.len() != len(ref) {
				t.Fatalf("step %d: len %d, want %d", step, tab.len(), len(ref))
			}
			for k, v := range ref {
				if tab.get(k) != v {
					t.Fatalf("step %d: get(%#x) wrong", step, k)
				}
			}
			n := 0
			tab.each(func(*block) { n++ })
			if n != len(ref) {
				t.Fatalf("step %d: each saw %d", step, n)
			}
		}
		if tab.get(0x2000_0000_0000) != nil {
			t.Fatal("absent key found")
		}
	}
}
