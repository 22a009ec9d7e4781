package store

import (
	"math"
	"runtime"
	"slices"
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/tiling"
)

// Settling a streamed log from its provisional roll (issue #29, round
// five). The provisional roll (from an empty device, no overrides,
// requested sizes) and the settled one (from the start, with the
// overrides and rounded sizes) apply the same entries, so where the trace
// has no segment entry they differ only in ways each block says for
// itself:
//
//   - a block an alloc made has the settled roll's attributes: its
//     override if it survives to the end, else its rounded size, marked
//     an estimate;
//   - a block a free_requested made (nothing was at its address) is, in
//     the settled roll, the start's block at that address when this was
//     the first entry to touch it, else the same block rounded;
//   - a start block no entry has touched yet is in the settled state
//     only;
//   - the segments are the start's throughout.
//
// Which blocks exist and their states are otherwise the same, and so are
// the pending-free deltas, but at the first touch of a start block that
// is pending free at the start (its free_requested adds nothing, its free
// takes its bytes off). settleFromProvisional turns the provisional
// checkpoints into settled ones with that, instead of rolling the segment
// map a second time; a trace with segment entries (whose ranges merge and
// split with the start's segments) is rolled again (rollRecords).

// never is a start block's first touch when no entry touches it.
const never = math.MaxInt64

// startTouch is what the settling needs of the start's blocks: them
// (address order), each one's first touching entry, and the order of
// their first touches, latest first.
type startTouch struct {
	blocks []tiling.Block
	at     map[uint64]int // address → index in blocks
	touch  []int64
	late   []int // indexes by touch, descending
}

// alive appends the start blocks no entry before position p touched.
func (t *startTouch) alive(p int64, out []tiling.Block) []tiling.Block {
	m := sort.Search(len(t.late), func(i int) bool { return t.touch[t.late[i]] < p })
	for _, j := range t.late[:m] {
		out = append(out, t.blocks[j])
	}
	return out
}

// hasSegmentEntries reports whether the log holds a segment entry.
func (d *devLog) hasSegmentEntries() bool {
	for _, a := range []snapshot.Action{snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap} {
		if d.byAction[a].Len() > 0 {
			return true
		}
	}
	return false
}

// settleFromProvisional sets d's checkpoints, head, pending-free series
// and pending bytes from src's provisional ones (d has its start: startAt;
// its overrides; src's records). cut, if not nil, is called after each
// checkpoint is added, as rollRecords calls it. It reports false, having
// changed nothing, where the provisional roll cannot be reused (segment
// entries, unpacked checkpoints).
func (d *devLog) settleFromProvisional(src *devLog, k int, cut func()) bool {
	if !d.packs || !src.packs || src.hasSegmentEntries() || src.sparse > 1 {
		return false
	}
	n := src.recs.Len()
	start := d.cps[0]
	st := startTouch{blocks: start.Blocks, at: make(map[uint64]int, len(start.Blocks)), touch: make([]int64, len(start.Blocks))}
	for j := range st.blocks {
		st.at[st.blocks[j].Addr] = j
		st.touch[j] = never
	}
	// the first touches, and the pending-free corrections they bring
	var fixes []pendFix
	left := len(st.blocks)
	for lo := 0; lo < n && left > 0; lo += chunkLen {
		src.recs.each(lo, min(n, lo+chunkLen), func(p []recBody, acts []snapshot.Action) {
			for i := range p {
				switch acts[i] {
				case snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFree, snapshot.ActionFreeCompleted:
				default:
					continue
				}
				j, ok := st.at[p[i].addr]
				if !ok || st.touch[j] != never {
					continue
				}
				seq := int64(lo + i)
				st.touch[j] = seq
				left--
				if acts[i] != snapshot.ActionAlloc && st.blocks[j].State == snapshot.StateActivePendingFree {
					fixes = append(fixes, pendFix{seq, -p[i].size})
				}
			}
		})
	}
	st.late = make([]int, len(st.blocks))
	for j := range st.late {
		st.late[j] = j
	}
	slices.SortStableFunc(st.late, func(a, b int) int {
		switch ta, tb := st.touch[a], st.touch[b]; {
		case ta > tb:
			return -1
		case ta < tb:
			return 1
		}
		return 0
	})
	var ovAt []uint64 // bit seq: the alloc at seq has an override
	if len(d.ov.Blocks) > 0 {
		ovAt = make([]uint64, (n+63)/64)
		for seq := range d.ov.Blocks {
			if seq >= 0 && seq < int64(n) {
				ovAt[seq>>6] |= 1 << (seq & 63)
			}
		}
	}
	est := d.ov.Round != nil
	size := func(req int64) int64 {
		if est {
			return d.ov.Round(req)
		}
		return req
	}
	// settled is the settled roll's block for provisional block b.
	settled := func(b tiling.Block) tiling.Block {
		if b.Born >= 0 && b.Born < int64(n) && src.recs.action(int(b.Born)) == snapshot.ActionAlloc {
			if ovAt != nil && ovAt[b.Born>>6]&(1<<(b.Born&63)) != 0 {
				o := d.ov.Blocks[b.Born]
				o.State = b.State
				if o.Frames == snapshot.NoStack {
					o.Frames = b.Frames
				}
				o.Born = b.Born
				return o
			}
		} else if j, ok := st.at[b.Addr]; ok && st.touch[j] == b.Born {
			s := st.blocks[j] // a free_requested of a start block
			s.State = b.State
			return s
		}
		b.Size, b.Est = size(b.Req), est
		return b
	}

	// the checkpoints, thinned to the settled roll's spacing
	src.lastMu.Lock()
	packed := make(map[*checkpoint]*packedBlocks, len(src.packed))
	for cp, p := range src.packed {
		packed[cp] = p
	}
	src.lastMu.Unlock()
	cps := slices.Clone(src.cps)
	next := d.checkpointGap(k)
	for _, pc := range cps {
		if pc.At < next || pc.At > int64(n) {
			continue
		}
		var whole []tiling.Block
		p := packed[pc]
		if p == nil {
			for _, b := range pc.Blocks {
				whole = append(whole, settled(b))
			}
			whole = st.alive(pc.At, whole)
			cp := &checkpoint{At: pc.At, Segs: start.Segs, Blocks: whole}
			if q := d.packBlocks(whole); q != nil {
				d.packedInto(cp, q)
			}
			d.cps = append(d.cps, cp)
		} else {
			// born is shared with p (both immutable) unless an override
			// leaves a block whole
			q := &packedBlocks{born: p.born[:0:0], flags: make([]uint8, 0, len(p.born)), whole: make([]tiling.Block, 0, len(p.whole))}
			shared := true
			for i, born := range p.born {
				f := p.flags[i] // a state only: the provisional roll neither rounds nor overrides
				if ovAt == nil || ovAt[born>>6]&(1<<(born&63)) == 0 {
					if est {
						f |= flagEst
					}
					q.flags = append(q.flags, f)
					if !shared {
						q.born = append(q.born, born)
					}
					continue
				}
				r := src.recs.ptr(int(born))
				b := settled(tiling.Block{Addr: r.addr, Size: r.size, Req: r.size, Frames: r.frames, State: snapshot.BlockState(f), Born: int64(born)})
				if !d.packable(&b) {
					if shared {
						q.born, shared = append(make([]uint32, 0, len(p.born)), p.born[:i]...), false
					}
					q.whole = append(q.whole, b)
					continue
				}
				if b.Est {
					f |= flagEst
				}
				if b.Size != d.sizeOf(b.Req, b.Est) {
					f |= flagSized
					q.sizes = append(q.sizes, b.Size)
				}
				q.flags = append(q.flags, f)
				if !shared {
					q.born = append(q.born, born)
				}
			}
			if shared {
				q.born = p.born
			}
			for _, b := range p.whole {
				q.whole = append(q.whole, settled(b))
			}
			q.whole = st.alive(pc.At, q.whole)
			cp := &checkpoint{At: pc.At, Segs: start.Segs}
			if len(q.born) < (len(q.born)+len(q.whole))/2 { // as packBlocks: whole when fewer than half pack
				cp.Blocks = d.blocksOf(q)
			} else {
				d.packedInto(cp, q)
			}
			d.cps = append(d.cps, cp)
		}
		last := d.cps[len(d.cps)-1]
		live := len(last.Blocks)
		if q := d.packed[last]; q != nil {
			live = len(q.born) + len(q.whole)
		}
		next = last.At + int64(max(k, live))
		if cut != nil {
			cut()
		}
	}

	// the head, after the last entry
	for j, t := range st.touch {
		if t != never {
			d.head.DelBlock(st.blocks[j].Addr)
		}
	}
	for b := range src.head.Blocks() {
		d.head.SetBlock(settled(b))
	}
	// the pending-free bytes: the provisional ones, corrected at the fixes
	// (the series follow in finishProvisional, in place)
	d.pending += src.pending
	for _, f := range fixes {
		d.pending += f.delta
	}
	d.pendFix, d.fromProv = fixes, true
	return true
}

// pendFix is a correction of the provisional pending-free bytes from entry
// seq on (settleFromProvisional).
type pendFix struct{ seq, delta int64 }

// finishProvisional is finishSeries for a log settled from the provisional
// roll (settleFromProvisional), whose active and allocated series are the
// provisional ones (d took them over): both from the start's values, the
// allocated bytes corrected where the start's pending-free blocks were
// first touched. Allocated = active − pending, settled and provisional
// alike, so the settled allocated bytes are the provisional ones plus the
// start's, less the corrections so far: the series is rewritten in place
// rather than a pending series made beside it.
func (d *devLog) finishProvisional() {
	d.active.v.update(func(_ int, xs []int64) {
		for j := range xs {
			xs[j] += d.initActive
		}
	})
	var corr int64
	fi := 0
	d.allocated.v.update(func(lo int, xs []int64) {
		for j := range xs {
			for fi < len(d.pendFix) && d.pendFix[fi].seq == int64(lo+j) {
				corr += d.pendFix[fi].delta
				fi++
			}
			xs[j] += d.initAllocated - corr
		}
	})
	d.reserved.addAll(d.initReserv)
	d.active.reindex()
	d.allocated.reindex()
	d.reserved.reindex()
	d.pendFix, d.fromProv = nil, false
}

// packedInto makes cp a packed checkpoint with blocks p.
func (d *devLog) packedInto(cp *checkpoint, p *packedBlocks) {
	if d.packed == nil {
		d.packed = map[*checkpoint]*packedBlocks{}
	}
	d.packed[cp] = p
	cp.Blocks = nil
}

// settleRoll is the segment-map side of settling src into d: from the
// provisional roll where it can be reused, else rolled again.
func (s *Store) settleRoll(src, d *devLog) {
	n := src.recs.Len()
	gcAt, gcEvery := int64(n)/4, int64(n)/4
	cut := func() {
		s.settledTo(src, d)
		if at := d.cps[len(d.cps)-1].At; n >= releaseCollect && at >= gcAt {
			// the provisional checkpoints replaced so far are garbage: a
			// collection now lets the roll reuse them (the heap goal
			// after the last one is twice what is live)
			runtime.GC()
			gcAt = at + gcEvery
		}
	}
	// settled from the provisional checkpoints, the replaced ones free
	// little (a settled checkpoint shares their positions): no collections
	fast := !settleRollAgain && d.settleFromProvisional(src, s.k, func() { s.settledTo(src, d) })
	if !fast {
		d.rollRecords(s.k, cut)
	}
	if settleHook != nil {
		settleHook(fast)
	}
}

// settleRollAgain (benchmarks) makes every streamed log roll its segment
// map again, as before settleFromProvisional.
var settleRollAgain bool

// settleHook, if set (tests), learns which way each streamed log settled.
var settleHook func(fromProvisional bool)
