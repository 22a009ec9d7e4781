package addrmap

import (
	"math/rand/v2"
	"testing"
)

// TestAgainstMap runs random inserts, puts, lookups and deletes on a Map
// and on a Go map side by side; keys come from small pools (so they
// collide, run into each other's probe runs and wrap around the table)
// and include 0.
func TestAgainstMap(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		pool := 1 + r.IntN(600)
		keys := make([]uint64, pool)
		for i := range keys {
			switch r.IntN(3) {
			case 0:
				keys[i] = uint64(i) // small, consecutive (0 included)
			case 1:
				keys[i] = 0x7f0000000000 + uint64(i)*512 // addresses
			default:
				keys[i] = r.Uint64()
			}
		}
		var m Map[int64]
		if seed%3 == 0 {
			m.Reserve(r.IntN(300))
		}
		want := map[uint64]int64{}
		for op := range 5000 {
			k := keys[r.IntN(pool)]
			switch r.IntN(5) {
			case 0:
				p, added := m.Insert(k)
				_, had := want[k]
				if added == had || (!added && *p != want[k]) || (added && *p != 0) {
					t.Fatalf("seed %d op %d: Insert(%#x) = %d, %v; want %d, %v", seed, op, k, *p, added, want[k], !had)
				}
				*p = int64(op)
				want[k] = int64(op)
			case 1:
				m.Put(k, -int64(op))
				want[k] = -int64(op)
			case 2, 3:
				_, had := want[k]
				if got := m.Delete(k); got != had {
					t.Fatalf("seed %d op %d: Delete(%#x) = %v, want %v", seed, op, k, got, had)
				}
				delete(want, k)
			default:
				v, ok := m.Get(k)
				w, had := want[k]
				if ok != had || v != w {
					t.Fatalf("seed %d op %d: Get(%#x) = %d, %v; want %d, %v", seed, op, k, v, ok, w, had)
				}
				if p := m.Ptr(k); (p != nil) != had || (p != nil && *p != w) {
					t.Fatalf("seed %d op %d: Ptr(%#x) wrong", seed, op, k)
				}
			}
			if m.Len() != len(want) {
				t.Fatalf("seed %d op %d: Len %d, want %d", seed, op, m.Len(), len(want))
			}
		}
		seen := map[uint64]bool{}
		for k, p := range m.All() {
			if w, ok := want[k]; !ok || *p != w || seen[k] {
				t.Fatalf("seed %d: All yields %#x = %d (want %d, %v; seen %v)", seed, k, *p, w, ok, seen[k])
			}
			seen[k] = true
		}
		if len(seen) != len(want) {
			t.Fatalf("seed %d: All yields %d keys, want %d", seed, len(seen), len(want))
		}
	}
}

func TestZeroMap(t *testing.T) {
	var m Map[string]
	if _, ok := m.Get(0); ok || m.Ptr(5) != nil || m.Delete(5) || m.Len() != 0 {
		t.Fatal("an empty map holds something")
	}
	for range m.All() {
		t.Fatal("an empty map yields something")
	}
	m.Put(0, "zero")
	if v, ok := m.Get(0); !ok || v != "zero" {
		t.Fatalf("Get(0) = %q, %v", v, ok)
	}
}

// benchKeys are the addresses of a walk with about live addresses alive
// at a time: each step frees one and allocates another, as a trace does.
func benchKeys(n, live int) []uint64 {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]uint64, n)
	for i := range out {
		out[i] = 0x7f0000000000 + uint64(r.IntN(4*live))*512
	}
	return out
}

// BenchmarkWalk is one insert-or-delete per entry over 1M entries on
// about 4,000 live addresses, as the undo walk and the Walker do;
// BenchmarkWalkGoMap is the same on a Go map (what they used before).
func BenchmarkWalk(b *testing.B) {
	keys := benchKeys(1<<20, 4096)
	for b.Loop() {
		var m Map[[5]int64]
		for i, k := range keys {
			if p, added := m.Insert(k); added {
				p[0] = int64(i)
			} else {
				m.Delete(k)
			}
		}
	}
}

func BenchmarkWalkGoMap(b *testing.B) {
	keys := benchKeys(1<<20, 4096)
	for b.Loop() {
		m := map[uint64][5]int64{}
		for i, k := range keys {
			if _, ok := m[k]; !ok {
				m[k] = [5]int64{int64(i)}
			} else {
				delete(m, k)
			}
		}
	}
}

// TestCraftedAddressesSpread: addresses built to share a fixed hash's top
// bits (t times the inverse of Fibonacci hashing's constant, which hash to
// t) and addresses 2 MiB apart, 200,000 of each, leave no probe run longer
// than random keys would: a crafted file cannot make every lookup walk the
// table.
func TestCraftedAddressesSpread(t *testing.T) {
	const c = 0x9E3779B97F4A7C15
	inv := uint64(c) // Newton's iteration for c's inverse mod 2^64
	for range 6 {
		inv *= 2 - c*inv
	}
	if inv*c != 1 {
		t.Fatal("no inverse")
	}
	for name, key := range map[string]func(i uint64) uint64{
		"fibonacci-inverse": func(i uint64) uint64 { return i * inv },
		"2MiB-apart":        func(i uint64) uint64 { return 0x7f0000000000 + i<<21 },
	} {
		var m Map[int32]
		for i := range uint64(200_000) {
			m.Put(key(i), int32(i))
		}
		// random keys at three quarters full: runs of a few hundred at most
		if longest := m.longestRun(); longest > 5000 {
			t.Errorf("%s: a probe run of %d slots among %d addresses", name, longest, m.Len())
		}
		if v, ok := m.Get(key(123_456)); !ok || v != 123_456 {
			t.Errorf("%s: Get = %d, %v", name, v, ok)
		}
	}
}

// TestCopyInWalkOrder: a table filled from another's walk (All, in slot
// order) grows without piling its keys into its first slots, as it would
// if both tables hashed alike (keys arriving sorted by home slot).
func TestCopyInWalkOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	var src Map[int32]
	for i := range 200_000 {
		src.Put(0x7f0000000000+r.Uint64N(1<<36)<<9, int32(i))
	}
	var dst Map[int32]
	longest := 0
	for k, v := range src.All() {
		dst.Put(k, *v)
		if dst.Len()%10_000 == 0 { // the pile-up is at its worst between rehashes
			longest = max(longest, dst.longestRun())
		}
	}
	if dst.Len() != src.Len() {
		t.Fatalf("copied %d of %d", dst.Len(), src.Len())
	}
	if longest > 5000 {
		t.Errorf("a probe run of %d slots while copying %d addresses", longest, dst.Len())
	}
}

// longestRun is the longest run of occupied slots (wrapping round).
func (m *Map[V]) longestRun() int {
	run, longest := 0, 0
	for i := range 2 * len(m.ctrl) {
		if m.ctrl[i%len(m.ctrl)] != 0 {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return min(longest, len(m.ctrl))
}
