package replay

import (
	"math/rand/v2"
	"testing"
)

// TestAddrSet checks the set against a Go map, address 0 and growth included.
func TestAddrSet(t *testing.T) {
	var s addrSet
	ref := map[uint64]bool{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200_000; i++ {
		a := r.Uint64N(50_000) * 512 // repeats, and 0
		if i%7 == 0 {
			a = r.Uint64() // anywhere, high bits too
		}
		if got, want := s.add(a), !ref[a]; got != want {
			t.Fatalf("add(%#x) = %v, want %v", a, got, want)
		}
		ref[a] = true
	}
	for i := 0; i < 100_000; i++ {
		a := r.Uint64N(100_000) * 512
		if s.has(a) != ref[a] {
			t.Fatalf("has(%#x) = %v, want %v", a, s.has(a), ref[a])
		}
	}
	var empty addrSet
	if empty.has(0) || empty.has(4096) {
		t.Fatal("an empty set has members")
	}
}
