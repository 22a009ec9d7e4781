package explain

import (
	"cmp"
	"slices"

	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Walker replays one device trace forward, keeping the live allocations.
type Walker struct {
	tl   *replay.Timeline
	live map[uint64]*replay.Alloc
	next int // entries applied
	// spare holds the allocations freed so far, for the next ones to
	// reuse: a walk over a 1M-entry trace would otherwise leave an object
	// per allocation to the collector (and its pages to be faulted in).
	spare []*replay.Alloc
}

// alloc is a cleared allocation, a spare one when there is.
func (w *Walker) alloc() *replay.Alloc {
	if k := len(w.spare); k > 0 {
		a := w.spare[k-1]
		w.spare = w.spare[:k-1]
		*a = replay.Alloc{}
		return a
	}
	return &replay.Alloc{}
}

// NewWalker starts at the state before entry 0 (Timeline.Start).
func NewWalker(tl *replay.Timeline) *Walker {
	w := &Walker{tl: tl, live: make(map[uint64]*replay.Alloc, len(tl.Start())+64)}
	for _, s := range tl.Start() {
		b := &s.Block
		a := w.live[b.Address]
		if a == nil {
			a = &replay.Alloc{Addr: b.Address, Stream: s.Stream, Born: -1}
			w.live[b.Address] = a
		}
		a.Size += s.Size()
		a.Frames = tiling.BlockFrames(b)
		a.Pending = b.State == snapshot.StateActivePendingFree
	}
	return w
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
		a := w.live[e.Addr]
		if a == nil {
			a = w.alloc()
			a.Addr = e.Addr
			w.live[e.Addr] = a
		}
		a.Size += e.Size
		a.Frames, a.Stream, a.Pending, a.Born, a.BornTime = e.Frames, e.Stream, false, i, e.TimeUS
		a.Forward = w.tl.Forward[i]
	case snapshot.ActionFreeRequested:
		if a := w.live[e.Addr]; a != nil {
			a.Pending = true
		}
	case snapshot.ActionFreeCompleted, snapshot.ActionFree:
		a := w.live[e.Addr]
		if a == nil {
			a = w.alloc()
			a.Addr, a.Frames, a.Stream, a.Born, a.BornTime = e.Addr, e.Frames, e.Stream, i, e.TimeUS
			w.live[e.Addr] = a
		}
		if a.Size -= e.Size; a.Size == 0 {
			delete(w.live, e.Addr)
			w.spare = append(w.spare, a)
		}
	}
}

// Live returns the live allocations in address order (a fresh slice).
func (w *Walker) Live() []replay.Alloc {
	out := make([]replay.Alloc, 0, len(w.live))
	for _, a := range w.live {
		out = append(out, *a)
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
