package explain

import (
	"cmp"
	"slices"

	"github.com/npumon/npumon/internal/addrmap"
	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Walker replays one device trace forward, keeping the live allocations.
type Walker struct {
	tl *replay.Timeline
	// live holds each live allocation in its address's slot (addrmap: a
	// walk looks up an address per entry, a million times on a 1M-entry
	// trace, and a map of pointers costs two cache misses where this
	// costs one)
	live addrmap.Map[walkAlloc]
	next int // entries applied
	// sums are the running sums of the grouper tracked (track; Note
	// [running sums]), nil when none is; pending the addresses of
	// allocations made or changed since the last flush, whose keys are
	// looked up there (one that dies before is never looked up)
	sums    *keySums
	pending []uint64
}

// walkAlloc is a live allocation (replay.Alloc's fields, the flag last:
// 56 bytes, 64 with the address in the table's slot, where embedding
// replay.Alloc made 72 and BenchmarkWalker1M ≈ 6 % slower) and, while the
// Walker tracks a grouper, the id of its key there (-1: not looked up
// yet, not in the sums).
type walkAlloc struct {
	Addr     uint64
	Size     int64
	Frames   snapshot.StackID
	Forward  snapshot.StackID
	Stream   uint64
	Born     int
	BornTime int64
	key      int32
	Pending  bool
}

// alloc is a as a replay.Alloc.
func (a *walkAlloc) alloc() replay.Alloc {
	return replay.Alloc{Addr: a.Addr, Size: a.Size, Frames: a.Frames, Forward: a.Forward, Stream: a.Stream,
		Pending: a.Pending, Born: a.Born, BornTime: a.BornTime}
}

// id is the id of a's key in s.
func (a *walkAlloc) id(s *keySums) int32 {
	x := a.alloc()
	return s.id(&x)
}

// NewWalker starts at the state before entry 0 (Timeline.Start).
func NewWalker(tl *replay.Timeline) *Walker {
	w := &Walker{tl: tl}
	w.live.Reserve(len(tl.Start()) + 64)
	for _, s := range tl.Start() {
		b := &s.Block
		a, added := w.live.Insert(b.Address)
		if added {
			*a = walkAlloc{Addr: b.Address, Stream: s.Stream, Born: -1}
		}
		a.Size += s.Size()
		a.Frames = tiling.BlockFrames(b)
		a.Pending = b.State == snapshot.StateActivePendingFree
	}
	return w
}

// track keeps running sums of the live allocations' keys in s from here
// on (Note [running sums]); the keys held so far count as changed.
func (w *Walker) track(s *keySums) {
	w.sums = s
	for _, a := range w.live.All() {
		a.key = a.id(s)
		s.add(a.key, a.Size, 1)
	}
}

// untrack stops keeping the sums.
func (w *Walker) untrack() { w.sums, w.pending = nil, nil }

// sum puts a back into the running sums after a change; rekey: its key may
// have changed (born again, or a new record), as it may with its size where
// the key depends on the size. Such an allocation's key is looked up at the
// next flush, if it lives until then.
func (w *Walker) sum(a *walkAlloc, rekey bool) {
	switch {
	case rekey || w.sums.sizeKeyed:
		a.key = -1
		w.pending = append(w.pending, a.Addr)
	case a.key >= 0:
		w.sums.add(a.key, a.Size, 1)
	}
}

// unsum takes a out of the running sums (before it changes or goes).
func (w *Walker) unsum(a *walkAlloc) {
	if a.key >= 0 {
		w.sums.add(a.key, -a.Size, -1)
	}
}

// flush looks up the keys of the allocations made or changed since the
// last flush that still live and puts them into the sums: the sums are
// then those of every live allocation.
func (w *Walker) flush() {
	for _, addr := range w.pending {
		if a := w.live.Ptr(addr); a != nil && a.key < 0 {
			a.key = a.id(w.sums)
			w.sums.add(a.key, a.Size, 1)
		}
	}
	w.pending = w.pending[:0]
}

// Applied is the number of entries applied so far.
func (w *Walker) Applied() int { return w.next }

// AdvanceTo applies entries up to and including index i (the state "after
// entry i"); an index already passed is a no-op.
func (w *Walker) AdvanceTo(i int) {
	i = min(i, len(w.tl.Entries)-1)
	for ; w.next <= i; w.next++ {
		w.apply(w.next)
	}
}

// apply rolls one entry forward. Sizes add and subtract per address as
// the active series does (Timeline.LiveAfter), so Σ sizes = active bytes.
func (w *Walker) apply(i int) {
	e := &w.tl.Entries[i]
	switch e.Action {
	case snapshot.ActionAlloc:
		a, added := w.live.Insert(e.Addr)
		if added {
			a.Addr = e.Addr
		} else if w.sums != nil {
			w.unsum(a)
		}
		a.Size += e.Size
		a.Frames, a.Stream, a.Pending, a.Born, a.BornTime = e.Frames, e.Stream, false, i, e.TimeUS
		a.Forward = w.tl.Forward[i]
		if w.sums != nil {
			w.sum(a, true)
		}
	case snapshot.ActionFreeRequested:
		if a := w.live.Ptr(e.Addr); a != nil {
			a.Pending = true
		}
	case snapshot.ActionFreeCompleted, snapshot.ActionFree:
		a, added := w.live.Insert(e.Addr)
		if added {
			a.Addr, a.Frames, a.Stream, a.Born, a.BornTime = e.Addr, e.Frames, e.Stream, i, e.TimeUS
		} else if w.sums != nil {
			w.unsum(a)
		}
		if a.Size -= e.Size; a.Size == 0 {
			w.live.Delete(e.Addr)
		} else if w.sums != nil {
			w.sum(a, added)
		}
	}
}

// Live returns the live allocations in address order (a fresh slice).
func (w *Walker) Live() []replay.Alloc {
	out := make([]replay.Alloc, 0, w.live.Len())
	for _, a := range w.live.All() {
		out = append(out, a.alloc())
	}
	slices.SortFunc(out, func(x, y replay.Alloc) int { return cmp.Compare(x.Addr, y.Addr) })
	return out
}

// LiveAfter returns the live allocations right after entry i (-1: before
// the first entry).
func LiveAfter(tl *replay.Timeline, i int) []replay.Alloc {
	w := NewWalker(tl)
	w.AdvanceTo(i)
	return w.Live()
}
