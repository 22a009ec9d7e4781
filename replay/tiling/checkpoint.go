package tiling

import (
	"cmp"
	"slices"
	"sync"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/addrmap"
)

// Checkpoint is a frozen segment map right after At entries: segments and
// live blocks, sorted by address once EnsureSorted has run. Dump leaves it
// unsorted (cheap to take while ingesting); the first query that needs it
// sorts it, once.
type Checkpoint struct {
	At     int64
	Segs   []snapshot.Segment // Blocks nil
	Blocks []Block
	sorted sync.Once
}

// EnsureSorted sorts the checkpoint the first time it is called.
func (cp *Checkpoint) EnsureSorted() { cp.sorted.Do(cp.sort) }

func (cp *Checkpoint) sort() {
	sortSegs(cp.Segs)
	slices.SortFunc(cp.Blocks, func(a, b Block) int { return cmp.Compare(a.Addr, b.Addr) })
}

// sortSegs sorts segments by address; sorted ones (checkpoints may share
// them) are only read.
func sortSegs(segs []snapshot.Segment) {
	cmpAddr := func(a, b snapshot.Segment) int { return cmp.Compare(a.Address, b.Address) }
	if !slices.IsSortedFunc(segs, cmpAddr) {
		slices.SortFunc(segs, cmpAddr)
	}
}

// Freeze copies the state into a sorted checkpoint.
func (st *State) Freeze(at int64) *Checkpoint {
	cp := st.Dump(at)
	if st.base == nil {
		cp.sort()
	} else if st.segs != nil {
		sortSegs(cp.Segs)
	}
	cp.sorted.Do(func() {})
	return cp
}

// Dump copies the state into a checkpoint; blocks come out unsorted unless
// the state has a base (then base and changes are merged in order).
func (st *State) Dump(at int64) *Checkpoint { return st.DumpInto(at, nil) }

// DumpInto is Dump with the blocks appended to buf[:0] when the state has
// no base (a caller that keeps only a packed copy reuses one buffer).
func (st *State) DumpInto(at int64, buf []Block) *Checkpoint {
	cp := &Checkpoint{At: at}
	switch {
	case st.segs == nil:
		cp.Segs = st.baseSegs // sorted, shared read-only
	case st.segsDump != nil:
		cp.Segs = st.segsDump // no segment changed since the last Dump
	default:
		cp.Segs = make([]snapshot.Segment, 0, len(st.segs))
		for _, s := range st.segs {
			cp.Segs = append(cp.Segs, s)
		}
		sortSegs(cp.Segs)
		st.segsDump = cp.Segs
	}
	if st.base == nil {
		cp.Blocks = buf[:0]
		if cap(buf) < st.blocks.Len() {
			cp.Blocks = make([]Block, 0, st.blocks.Len())
		}
		for _, b := range st.blocks.All() {
			cp.Blocks = append(cp.Blocks, *b)
		}
		return cp
	}
	changed := make([]Block, 0, st.blocks.Len())
	for _, b := range st.blocks.All() {
		changed = append(changed, *b)
	}
	slices.SortFunc(changed, func(a, b Block) int { return cmp.Compare(a.Addr, b.Addr) })
	out := make([]Block, 0, len(st.base)+len(changed))
	i, j := 0, 0
	for i < len(st.base) || j < len(changed) {
		switch {
		case j == len(changed) || (i < len(st.base) && st.base[i].Addr < changed[j].Addr):
			b := st.base[i]
			i++
			if _, ok := st.gone[b.Addr]; !ok {
				out = append(out, b)
			}
		case i < len(st.base) && st.base[i].Addr == changed[j].Addr:
			i++ // replaced by the change
		default:
			out = append(out, changed[j])
			j++
		}
	}
	cp.Blocks = out
	return cp
}

// Thaw returns a mutable state on top of a checkpoint (sorting it first):
// blocks stay in the checkpoint and only changes are kept; segments are
// copied on the first segment entry.
func (cp *Checkpoint) Thaw() *State {
	cp.EnsureSorted()
	st := &State{blocks: &addrmap.Map[Block]{}, base: cp.Blocks, gone: map[uint64]struct{}{}, baseSegs: cp.Segs}
	if st.base == nil {
		st.base = []Block{}
	}
	return st
}
