package allocator

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/npumon/npumon/acl"
)

// checkSet fails unless s holds exactly want, in order, in well-formed
// chunks.
func checkSet(t *testing.T, s *keySet, want []poolKey, step int) {
	t.Helper()
	var got []poolKey
	if len(s.lasts) != len(s.chunks) {
		t.Fatalf("step %d: %d chunks, %d last keys", step, len(s.chunks), len(s.lasts))
	}
	for i, ch := range s.chunks {
		if len(ch) == 0 && len(s.chunks) > 1 || len(ch) > chunkMax {
			t.Fatalf("step %d: chunk %d of %d holds %d keys", step, i, len(s.chunks), len(ch))
		}
		if len(ch) > 0 && s.lasts[i] != ch[len(ch)-1] {
			t.Fatalf("step %d: chunk %d's last key is %+v, lasts says %+v", step, i, ch[len(ch)-1], s.lasts[i])
		}
		got = append(got, ch...)
	}
	if s.len() != len(want) || !slices.Equal(got, want) {
		t.Fatalf("step %d: set holds %d keys (counts %d), want %d", step, len(got), s.len(), len(want))
	}
	var back []poolKey
	for at := s.last(); at.c >= 0; at = s.prev(at) {
		back = append(back, *s.key(at))
	}
	slices.Reverse(back)
	if !slices.Equal(back, want) {
		t.Fatalf("step %d: walking backwards gives another order", step)
	}
}

func cmpKey(a, b poolKey) int {
	switch {
	case a.less(&b):
		return -1
	case b.less(&a):
		return 1
	}
	return 0
}

// TestKeySetAgainstSortedSlice drives a keySet and a plain sorted slice
// with the same random inserts, deletes, in-place updates and searches,
// through growth past many chunks and back to empty.
func TestKeySetAgainstSortedSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	var s keySet
	var model []poolKey
	randKey := func(id int32) poolKey {
		return poolKey{stream: acl.Stream(rng.IntN(3)), size: int64(rng.IntN(64)) * 512, ptr: uint64(rng.IntN(1 << 20)), id: id}
	}
	var next int32
	most, least := 0, 1<<30
	target := func(step int) int { // grow to ~3000 keys, shrink, grow again
		switch {
		case step < 8000:
			return 3000
		case step < 14000:
			return 0
		}
		return 600
	}
	for step := range 20000 {
		grow := len(model) < target(step)
		switch op := rng.IntN(10); {
		case op < 6 && grow || op < 1:
			k := randKey(next)
			next++
			if _, dup := slices.BinarySearchFunc(model, k, cmpKey); dup {
				continue
			}
			s.insert(k)
			i, _ := slices.BinarySearchFunc(model, k, cmpKey)
			model = slices.Insert(model, i, k)
		case op < 8 && len(model) > 0:
			k := model[rng.IntN(len(model))]
			at, ok := s.find(k)
			if !ok {
				t.Fatalf("step %d: %+v not found", step, k)
			}
			s.delete(at)
			i, _ := slices.BinarySearchFunc(model, k, cmpKey)
			model = slices.Delete(model, i, i+1)
		case len(model) > 0:
			// update: a near key (in place) or a far one (moves)
			i := rng.IntN(len(model))
			k := model[i]
			at, _ := s.find(k)
			nk := k
			if rng.IntN(2) == 0 {
				nk.ptr++
			} else {
				nk = randKey(k.id)
			}
			j, dup := slices.BinarySearchFunc(model, nk, cmpKey)
			if dup && j != i {
				continue
			}
			s.update(at, nk)
			model = slices.Delete(model, i, i+1)
			j, _ = slices.BinarySearchFunc(model, nk, cmpKey)
			model = slices.Insert(model, j, nk)
		}
		// seek agrees with the model's lower bound
		q := randKey(-1)
		at := s.seek(q)
		j, _ := slices.BinarySearchFunc(model, q, cmpKey)
		if j == len(model) {
			if s.valid(at) {
				t.Fatalf("step %d: seek past the end found %+v", step, *s.key(at))
			}
		} else if !s.valid(at) || *s.key(at) != model[j] {
			t.Fatalf("step %d: seek(%+v) wrong", step, q)
		}
		most = max(most, len(model))
		if step > 8000 {
			least = min(least, len(model))
		}
		if step%97 == 0 || len(model) < 3 {
			checkSet(t, &s, model, step)
		}
	}
	checkSet(t, &s, model, -1)
	if most < 20*chunkMax || least > 2 {
		t.Fatalf("the sizes went from %d to %d only", most, least)
	}
	if len(s.chunks) > 2*len(model)/(chunkMax/4)+2 {
		t.Errorf("%d chunks for %d keys", len(s.chunks), len(model))
	}
}

// TestBlockTableReusesIDs: past maxSpareBlocks recycled block structs are
// let go and their ids reused, and pools of thousands of free blocks (many
// chunks) keep their order through splits, merges and releases.
func TestBlockTableReusesIDs(t *testing.T) {
	e := newEnv(t, "", false, 0)
	a := e.a
	var ptrs []uint64
	for range 3 * maxSpareBlocks {
		p, err := a.Malloc(512, acl.DefaultStream)
		if err != nil {
			t.Fatal(err)
		}
		ptrs = append(ptrs, p)
	}
	// every other one: thousands of free blocks that cannot merge
	for i := 0; i < len(ptrs); i += 2 {
		if err := a.Free(ptrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkPoolOrder(t, a, "holes")
	if n := a.small.blocks.len(); n < maxSpareBlocks || len(a.small.blocks.chunks) < 10 {
		t.Fatalf("%d free blocks in %d chunks", n, len(a.small.blocks.chunks))
	}
	for i := 1; i < len(ptrs); i += 2 { // now they merge: structs recycled past the cap
		if err := a.Free(ptrs[i]); err != nil {
			t.Fatal(err)
		}
	}
	checkPoolOrder(t, a, "merged")
	if len(a.spare) != maxSpareBlocks || len(a.tab.free) == 0 {
		t.Fatalf("%d spare structs, %d free ids", len(a.spare), len(a.tab.free))
	}
	made := len(a.tab.blocks)
	for range 2 * maxSpareBlocks {
		if _, err := a.Malloc(512, acl.DefaultStream); err != nil {
			t.Fatal(err)
		}
	}
	checkPoolOrder(t, a, "again")
	if len(a.tab.blocks) != made {
		t.Errorf("the block table grew from %d to %d ids: dropped ids not reused", made, len(a.tab.blocks))
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	checkPoolOrder(t, a, "emptied")
}
