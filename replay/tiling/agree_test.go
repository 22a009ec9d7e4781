package tiling

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// gen makes random traces an allocator could have written: blocks are
// allocated only in free ranges of a segment and freed with the sizes and
// stacks they were allocated with; segments are freed whole and empty;
// expandable memory is mapped next to its own segment (or apart from every
// other) and unmapped where nothing is live, in large ranges.
type gen struct {
	r    *rand.Rand
	st   *State // the trace so far, rolled forward: the generator's model
	next uint64 // next fresh address
}

const unit = 4 << 20 // expandable ranges: large segments

func (g *gen) segs() []snapshot.Segment {
	cp := g.st.Freeze(0)
	return cp.Segs
}

func (g *gen) liveIn(lo, hi uint64) bool {
	for b := range g.st.Blocks() {
		if b.Addr < hi && b.Addr+uint64(b.Size) > lo {
			return true
		}
	}
	return false
}

func (g *gen) fresh(size int64) uint64 {
	a := g.next + uint64(g.r.IntN(4)+1)*unit // always a gap between segments
	g.next = a + uint64(size)
	return a
}

// entry returns one valid entry for the current state, or ok false.
func (g *gen) entry() (Entry, bool) {
	segs := g.segs()
	stream := uint64(g.r.IntN(2))
	switch k := g.r.IntN(10); {
	case k == 0:
		size := int64(g.r.IntN(3)+1) << 20
		if g.r.IntN(2) == 0 {
			size = int64(g.r.IntN(3)+1) * unit
		}
		return Entry{Action: snapshot.ActionSegmentAlloc, Addr: g.fresh(size), Size: size, Stream: stream, Frames: snapshot.StackID(g.r.IntN(3))}, true
	case k == 1:
		for _, s := range segs {
			if !s.IsExpandable && !g.liveIn(s.Address, s.End()) && g.r.IntN(2) == 0 {
				return Entry{Action: snapshot.ActionSegmentFree, Addr: s.Address, Size: s.TotalSize, Stream: s.Stream, Frames: s.Frames}, true
			}
		}
	case k == 2:
		size := int64(g.r.IntN(2)+1) * unit
		for _, s := range segs {
			if s.IsExpandable && g.r.IntN(2) == 0 {
				if g.r.IntN(2) == 0 && s.End() == g.next {
					g.next += uint64(size)
					return Entry{Action: snapshot.ActionSegmentMap, Addr: s.End(), Size: size, Stream: s.Stream, Frames: s.Frames}, true
				}
			}
		}
		return Entry{Action: snapshot.ActionSegmentMap, Addr: g.fresh(size), Size: size, Stream: 7, Frames: 5}, true
	case k == 3:
		for _, s := range segs {
			if !s.IsExpandable || g.r.IntN(2) == 0 {
				continue
			}
			n := s.TotalSize / unit
			lo := s.Address + uint64(g.r.Int64N(n))*unit
			hi := min(s.End(), lo+uint64(g.r.Int64N(n)+1)*unit)
			if !g.liveIn(lo, hi) {
				return Entry{Action: snapshot.ActionSegmentUnmap, Addr: lo, Size: int64(hi - lo), Stream: s.Stream, Frames: s.Frames}, true
			}
		}
	case k < 7:
		if len(segs) == 0 {
			return Entry{}, false
		}
		s := segs[g.r.IntN(len(segs))]
		size := int64(g.r.IntN(64)+1) * 512
		if size > s.TotalSize {
			return Entry{}, false
		}
		a := s.Address + uint64(g.r.Int64N((s.TotalSize-size)/512+1))*512
		if g.liveIn(a, a+uint64(size)) {
			return Entry{}, false
		}
		return Entry{Action: snapshot.ActionAlloc, Addr: a, Size: size, Stream: s.Stream, Frames: snapshot.StackID(g.r.IntN(4))}, true
	default:
		for b := range g.st.Blocks() {
			if g.r.IntN(3) != 0 {
				continue
			}
			e := Entry{Addr: b.Addr, Size: b.Req, Frames: b.Frames}
			switch {
			case b.State == snapshot.StateActivePendingFree:
				e.Action = snapshot.ActionFreeCompleted
			case g.r.IntN(3) == 0:
				e.Action = snapshot.ActionFree
			default:
				e.Action = snapshot.ActionFreeRequested
			}
			return e, true
		}
	}
	return Entry{}, false
}

func (g *gen) trace(n int) []Entry {
	var out []Entry
	for len(out) < n {
		if e, ok := g.entry(); ok {
			g.st.Apply(&e, int64(len(out)), 0, nil)
			out = append(out, e)
		}
	}
	return out
}

func tiled(st *State) []snapshot.Segment {
	cp := st.Freeze(0)
	return Build(0, cp.Segs, cp.Blocks, nil).Segments
}

// Property: rolling a random trace forward (from a random start, through
// checkpoints) and undoing it backwards from its end give the same
// segment map after every entry.
func TestApplyUndoAgree(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := &gen{r: rand.New(rand.NewPCG(seed, 14)), st: NewState(), next: 1 << 30}
			g.trace(g.r.IntN(200)) // a start with segments and live blocks
			start := tiled(g.st)
			g.st = FromSegments(start)
			entries := g.trace(250)

			// forward, thawing from a checkpoint every k entries
			k := g.r.IntN(40) + 1
			fwd := make([][]snapshot.Segment, len(entries)+1)
			st := FromSegments(start)
			fwd[0] = tiled(st)
			for i := range entries {
				if i%k == 0 {
					st = st.Freeze(int64(i)).Thaw()
				}
				st.Apply(&entries[i], int64(i), 0, nil)
				fwd[i+1] = tiled(st)
			}
			if !reflect.DeepEqual(fwd[0], start) {
				t.Fatalf("start state does not survive FromSegments")
			}
			// backward from the final state
			back := FromSegments(fwd[len(entries)])
			for i := len(entries) - 1; i >= -1; i-- {
				if got := tiled(back); !reflect.DeepEqual(got, fwd[i+1]) {
					t.Fatalf("after entry %d (%+v): undo gives\n%+v\nforward gives\n%+v", i, entries[max(i, 0)], got, fwd[i+1])
				}
				if i >= 0 {
					back.Undo(traceEntry(&entries[i]), 0, nil)
				}
			}
		})
	}
}

// Measure and FiguresOf agree with the tiling Build makes.
func TestFiguresAgree(t *testing.T) {
	for seed := range uint64(40) {
		g := &gen{r: rand.New(rand.NewPCG(seed, 3)), st: NewState(), next: 1 << 30}
		g.trace(400)
		cp := g.st.Freeze(0)
		b := Build(0, cp.Segs, cp.Blocks, nil)
		if m := Measure(cp.Segs, cp.Blocks); m != b.Figures || b.Figures.Free == 0 || b.Figures.LiveBlocks == 0 {
			t.Fatalf("seed %d: Measure %+v, Build %+v", seed, m, b.Figures)
		}
		if f := FiguresOf(b.Segments); f != b.Figures {
			t.Fatalf("seed %d: FiguresOf %+v, Build %+v", seed, f, b.Figures)
		}
	}
}

// traceEntry is e as the TraceEntry Undo reads.
func traceEntry(e *Entry) *snapshot.TraceEntry {
	return &snapshot.TraceEntry{Action: e.Action, Addr: e.Addr, Size: e.Size, Stream: e.Stream, Frames: e.Frames, PoolID: e.Pool, HasPoolID: e.HasPool}
}
