package store

import (
	"math/rand/v2"
	"slices"

	"github.com/npumon/npumon/allocator/snapshot"
)

// genCapture simulates a small caching allocator and returns a consistent
// capture: the final segments plus the trace that led to them. Some state
// predates the trace (ghost blocks, segments), some frees stay pending, and
// segments come and go. Block sizes are rounded slots, trace sizes are the
// requested bytes, as in real files.
func genCapture(seed uint64, n int, withTime bool) *snapshot.Snapshot {
	return genCaptureSegs(seed, n, withTime, false)
}

// genCaptureSegs is genCapture; with fixed, the segments are the ones
// before the trace throughout (no segment entries, as in most dumps), more
// of them, and some of the blocks live before the trace are pending free.
func genCaptureSegs(seed uint64, n int, withTime, fixed bool) *snapshot.Snapshot {
	r := rand.New(rand.NewPCG(seed, 7))
	type blk struct {
		size, req int64
		state     snapshot.BlockState
	}
	type seg struct {
		addr   uint64
		size   int64
		slot   int64
		stream uint64
		blocks map[uint64]*blk
	}
	segs := map[uint64]*seg{}
	var next uint64 = 0x7f0000000000
	newSeg := func(large bool) *seg {
		s := &seg{addr: next, size: 2 << 20, slot: 128 << 10, stream: uint64(r.IntN(2)) * 0x5555, blocks: map[uint64]*blk{}}
		if large {
			s.size, s.slot = 20<<20, 2<<20
		}
		next += 1 << 26
		segs[s.addr] = s
		return s
	}
	freeSlot := func(s *seg) (uint64, bool) {
		for k := 0; k < 4; k++ {
			a := s.addr + uint64(r.Int64N(s.size/s.slot)*s.slot)
			if _, ok := s.blocks[a]; !ok {
				return a, true
			}
		}
		return 0, false
	}
	pick := func() *seg {
		if len(segs) == 0 {
			return nil
		}
		keys := make([]uint64, 0, len(segs))
		for k := range segs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return segs[keys[r.IntN(len(keys))]]
	}
	// state before the trace
	nsegs, nblocks := 3, 3
	if fixed {
		nsegs, nblocks = 6, 8
	}
	for i := 0; i < nsegs; i++ {
		s := newSeg(i == 0)
		for j := 0; j < nblocks; j++ {
			if a, ok := freeSlot(s); ok {
				s.blocks[a] = &blk{size: s.slot, req: s.slot - r.Int64N(s.slot/2), state: snapshot.StateActiveAllocated}
				if fixed && r.IntN(3) == 0 {
					s.blocks[a].state = snapshot.StateActivePendingFree
				}
			}
		}
	}
	var tr []snapshot.TraceEntry
	t := int64(1_700_000_000_000_000)
	emit := func(a snapshot.Action, addr uint64, size int64, stream uint64) {
		e := snapshot.TraceEntry{Action: a, Addr: addr, Size: size, Stream: stream, Frames: snapshot.StackID(1 + r.IntN(3))}
		if withTime {
			t += 1 + r.Int64N(50)
			e.TimeUS = t
		}
		tr = append(tr, e)
	}
	for len(tr) < n {
		switch x := r.IntN(100); {
		case x < 7 && fixed:
			continue
		case x < 4:
			s := newSeg(r.IntN(3) == 0)
			emit(snapshot.ActionSegmentAlloc, s.addr, s.size, s.stream)
		case x < 7:
			s := pick()
			if s != nil && len(s.blocks) == 0 {
				delete(segs, s.addr)
				emit(snapshot.ActionSegmentFree, s.addr, s.size, s.stream)
			}
		case x < 50:
			s := pick()
			if s == nil {
				continue
			}
			if a, ok := freeSlot(s); ok {
				b := &blk{size: s.slot, req: s.slot - r.Int64N(s.slot/2), state: snapshot.StateActiveAllocated}
				s.blocks[a] = b
				emit(snapshot.ActionAlloc, a, b.req, s.stream)
			}
		case x < 98:
			s := pick()
			if s == nil {
				continue
			}
			for a, b := range s.blocks {
				if b.state == snapshot.StateActiveAllocated {
					emit(snapshot.ActionFreeRequested, a, b.req, s.stream)
					b.state = snapshot.StateActivePendingFree
					if r.IntN(5) != 0 {
						emit(snapshot.ActionFreeCompleted, a, b.req, s.stream)
						delete(s.blocks, a)
					}
				} else if r.IntN(2) == 0 {
					emit(snapshot.ActionFreeCompleted, a, b.req, s.stream)
					delete(s.blocks, a)
				}
				break
			}
		default:
			e := snapshot.TraceEntry{Action: snapshot.ActionOOM, Size: 1 << 30, DeviceFree: 12345}
			if withTime {
				t++
				e.TimeUS = t
			}
			tr = append(tr, e)
		}
	}
	snap := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}, Stacks: []snapshot.Stack{nil,
		{{Filename: "a.py", Line: 1, Name: "f"}}, {{Filename: "b.py", Line: 2, Name: "g"}}, {{Filename: "c.py", Line: 3, Name: "h"}}}}
	addrs := make([]uint64, 0, len(segs))
	for a := range segs {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		s := segs[a]
		out := snapshot.Segment{Device: 0, Address: a, TotalSize: s.size, Stream: s.stream, IsLarge: s.size > 2<<20}
		cur := a
		keys := make([]uint64, 0, len(s.blocks))
		for k := range s.blocks {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b := s.blocks[k]
			if k > cur {
				out.Blocks = append(out.Blocks, snapshot.Block{Address: cur, Size: int64(k - cur)})
			}
			out.Blocks = append(out.Blocks, snapshot.Block{Address: k, Size: b.size, RequestedSize: b.req, State: b.state})
			out.ActiveSize += b.size
			if b.state == snapshot.StateActiveAllocated {
				out.AllocatedSize += b.size
			}
			cur = k + uint64(b.size)
		}
		if end := a + uint64(s.size); cur < end {
			out.Blocks = append(out.Blocks, snapshot.Block{Address: cur, Size: int64(end - cur)})
		}
		snap.Segments = append(snap.Segments, out)
	}
	return snap
}
