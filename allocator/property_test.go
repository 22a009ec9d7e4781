package allocator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

// checkInvariants verifies, on a fresh Snapshot, that blocks tile every
// segment, live blocks never overlap, Stats() equals the sums over the
// snapshot and reserved bytes equal what acl reports as used.
func checkInvariants(t *testing.T, e *testEnv, live map[uint64]int64, where string) *snapshot.Snapshot {
	t.Helper()
	checkPoolOrder(t, e.a, where)
	s := e.a.Snapshot()
	st := e.a.Stats()
	type span struct{ start, end uint64 }
	var spans []span
	var sum [3]struct {
		allocated, active, requested, reserved, nAlloc, nActive, segs, inSplit, inSplitBytes int64
	}
	expandable := false
	for _, seg := range s.Segments {
		addr := seg.Address
		var total, alloc, act, req int64
		k := StatSmall
		if seg.IsLarge {
			k = StatLarge
		}
		for j, b := range seg.Blocks {
			if j > 0 && b.State == snapshot.StateInactive && seg.Blocks[j-1].State == snapshot.StateInactive {
				t.Fatalf("%s: segment %#x: adjacent free blocks at %#x were not merged", where, seg.Address, b.Address)
			}
			if b.Address != addr {
				t.Fatalf("%s: segment %#x: block at %#x, want %#x (blocks must tile)", where, seg.Address, b.Address, addr)
			}
			if b.Size <= 0 {
				t.Fatalf("%s: segment %#x: block %#x of size %d", where, seg.Address, b.Address, b.Size)
			}
			addr += uint64(b.Size)
			total += b.Size
			for _, i := range []int{StatAll, k} {
				switch b.State {
				case snapshot.StateActiveAllocated:
					sum[i].nAlloc++
					sum[i].nActive++
				case snapshot.StateActivePendingFree:
					sum[i].nActive++
				case snapshot.StateInactive:
					if !seg.IsExpandable && len(seg.Blocks) > 1 {
						sum[i].inSplit++
						sum[i].inSplitBytes += b.Size
					}
				}
			}
			if b.State == snapshot.StateActiveAllocated {
				alloc += b.Size
				if want, ok := live[b.Address]; !ok || want != b.RequestedSize {
					t.Fatalf("%s: allocated block %#x requested %d, caller holds %d (%v)", where, b.Address, b.RequestedSize, want, ok)
				}
			}
			if b.State.Active() {
				act += b.Size
				req += b.RequestedSize
			}
		}
		if total != seg.TotalSize || alloc != seg.AllocatedSize || act != seg.ActiveSize || req != seg.RequestedSize {
			t.Fatalf("%s: segment %#x totals %d/%d/%d/%d, blocks sum to %d/%d/%d/%d", where, seg.Address,
				seg.TotalSize, seg.AllocatedSize, seg.ActiveSize, seg.RequestedSize, total, alloc, act, req)
		}
		spans = append(spans, span{seg.Address, seg.End()})
		for _, i := range []int{StatAll, k} {
			sum[i].allocated += alloc
			sum[i].active += act
			sum[i].requested += req
			sum[i].reserved += total
			sum[i].segs++
		}
		expandable = expandable || seg.IsExpandable
	}
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Fatalf("%s: segments overlap: [%#x,%#x) and [%#x,%#x)", where, spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
	nLive := 0
	for i := range 3 {
		got := []int64{st.AllocatedBytes[i].Current, st.ActiveBytes[i].Current, st.RequestedBytes[i].Current,
			st.ReservedBytes[i].Current, st.Allocation[i].Current, st.Active[i].Current}
		want := []int64{sum[i].allocated, sum[i].active, sum[i].requested, sum[i].reserved, sum[i].nAlloc, sum[i].nActive}
		if !expandable {
			got = append(got, st.Segment[i].Current, st.InactiveSplit[i].Current, st.InactiveSplitBytes[i].Current)
			want = append(want, sum[i].segs, sum[i].inSplit, sum[i].inSplitBytes)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: stats[%s] allocated/active/requested/reserved/allocation/active(/segment/inactive_split/bytes) = %v, snapshot sums %v",
				where, statTypeNames[i], got, want)
		}
		nLive = int(sum[StatAll].nAlloc)
	}
	if nLive != len(live) {
		t.Fatalf("%s: %d allocated blocks, caller holds %d", where, nLive, len(live))
	}
	if used := e.dev.Info().HBMUsed; used != st.ReservedBytes[StatAll].Current {
		t.Fatalf("%s: reserved %d, acl reports %d used", where, st.ReservedBytes[StatAll].Current, used)
	}
	return s
}

// replayTrace rebuilds live blocks and device memory from a trace alone.
type replayState struct {
	blocks   map[uint64][2]int64 // addr → requested, state
	segments map[uint64]int64    // segment_alloc'd segments
	pages    map[uint64]bool     // mapped 2 MiB granules of expandable segments
}

func replayTrace(t *testing.T, tr []snapshot.TraceEntry) replayState {
	r := replayState{blocks: map[uint64][2]int64{}, segments: map[uint64]int64{}, pages: map[uint64]bool{}}
	g := uint64(acl.Granularity)
	for i, e := range tr {
		switch e.Action {
		case snapshot.ActionAlloc:
			if _, ok := r.blocks[e.Addr]; ok {
				t.Fatalf("replay %d: alloc of live %#x", i, e.Addr)
			}
			r.blocks[e.Addr] = [2]int64{e.Size, int64(snapshot.StateActiveAllocated)}
		case snapshot.ActionFreeRequested:
			r.blocks[e.Addr] = [2]int64{e.Size, int64(snapshot.StateActivePendingFree)}
		case snapshot.ActionFreeCompleted:
			if _, ok := r.blocks[e.Addr]; !ok {
				t.Fatalf("replay %d: free_completed of unknown %#x", i, e.Addr)
			}
			delete(r.blocks, e.Addr)
		case snapshot.ActionSegmentAlloc:
			r.segments[e.Addr] = e.Size
		case snapshot.ActionSegmentFree:
			if r.segments[e.Addr] != e.Size {
				t.Fatalf("replay %d: segment_free %#x size %d, allocated %d", i, e.Addr, e.Size, r.segments[e.Addr])
			}
			delete(r.segments, e.Addr)
		case snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
			for p := e.Addr; p < e.Addr+uint64(e.Size); p += g {
				if r.pages[p] == (e.Action == snapshot.ActionSegmentMap) {
					t.Fatalf("replay %d: %s of page %#x in wrong state", i, e.Action, p)
				}
				r.pages[p] = e.Action == snapshot.ActionSegmentMap
				if !r.pages[p] {
					delete(r.pages, p)
				}
			}
		}
	}
	return r
}

// checkPoolOrder: best fit depends on each pool holding its free blocks in
// strict (stream, size, address) order, unmapped ones in (stream, address)
// order, and nothing else.
func checkPoolOrder(t *testing.T, a *Allocator, where string) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range []*blockPool{&a.small, &a.large} {
		blocks, unmapped := poolLists(t, p)
		for i, b := range blocks {
			if b.pool != p || b.allocated || !b.mapped {
				t.Fatalf("%s: pool holds block %#x (allocated %v, mapped %v, own pool %v)", where, b.ptr, b.allocated, b.mapped, b.pool == p)
			}
			if i > 0 && !lessSize(blocks[i-1], b.stream, b.size, b.ptr) {
				t.Fatalf("%s: pool out of order at %d: %#x (%d B) before %#x (%d B)", where, i, blocks[i-1].ptr, blocks[i-1].size, b.ptr, b.size)
			}
		}
		for i, b := range unmapped {
			if b.pool != p || b.mapped || (i > 0 && !lessAddr(unmapped[i-1], b.stream, b.ptr)) {
				t.Fatalf("%s: unmapped set wrong at %d: %#x", where, i, b.ptr)
			}
		}
	}
}

func checkReplay(t *testing.T, s *snapshot.Snapshot) {
	t.Helper()
	r := replayTrace(t, s.DeviceTraces[0])
	blocks := map[uint64][2]int64{}
	segments := map[uint64]int64{}
	pages := map[uint64]bool{}
	for _, seg := range s.Segments {
		if seg.IsExpandable {
			for p := seg.Address; p < seg.End(); p += uint64(acl.Granularity) {
				pages[p] = true
			}
		} else {
			segments[seg.Address] = seg.TotalSize
		}
		for _, b := range seg.Blocks {
			if b.State.Active() {
				blocks[b.Address] = [2]int64{b.RequestedSize, int64(b.State)}
			}
		}
	}
	if fmt.Sprint(blocks) != fmt.Sprint(r.blocks) {
		t.Fatalf("replayed live blocks differ:\nsnapshot %v\nreplay   %v", blocks, r.blocks)
	}
	if fmt.Sprint(segments) != fmt.Sprint(r.segments) {
		t.Fatalf("replayed segments differ:\nsnapshot %v\nreplay   %v", segments, r.segments)
	}
	if fmt.Sprint(pages) != fmt.Sprint(r.pages) {
		t.Fatalf("replayed mapped pages differ: snapshot %d pages, replay %d", len(pages), len(r.pages))
	}
}

// TestPropertyRandomOps drives random malloc / free / record_stream /
// empty_cache / fraction changes on three streams and checks the
// invariants after every step and the trace replay at the end.
func TestPropertyRandomOps(t *testing.T) {
	configs := []struct {
		name, conf string
		cuda       bool
	}{
		{"npu-default", "", false},
		{"npu-maxsplit-gc", "max_split_size_mb:20,garbage_collection_threshold:0.6,roundup_power2_divisions:[1:4,16:2,>:1]", false},
		{"npu-expandable", "expandable_segments:True", false},
		{"npu-expandable-lazy", "expandable_segments:True,base_addr_aligned_kb:4,multi_stream_lazy_reclaim:True", false},
		{"cuda-default", "", true},
		{"cuda-expandable-maxsplit", "expandable_segments:True,max_split_size_mb:24", true},
		{"cuda-gc-divisions", "garbage_collection_threshold:0.7,max_split_size_mb:30,roundup_power2_divisions:4,large_segment_size_mb:40", true},
	}
	steps := 1200
	if testing.Short() {
		steps = 300
	}
	for ci, c := range configs {
		for seed := uint64(1); seed <= propertySeeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				runRandomOps(t, c.conf, c.cuda, uint64(ci)*100+seed, steps)
			})
		}
	}
}

// propertySeeds is the number of seeds per configuration; raise it locally
// for a longer search.
var propertySeeds = uint64(2)

func runRandomOps(t *testing.T, conf string, cuda bool, seed uint64, steps int) {
	e := newEnv(t, conf, cuda, 256*config.MiB)
	rng := rand.New(rand.NewPCG(seed, seed*7+1))
	streams := []acl.Stream{e.stream(), e.stream(), e.stream()}
	live := map[uint64]int64{}
	var ptrs []uint64
	ooms, pendingSeen := 0, 0
	for step := range steps {
		where := fmt.Sprintf("step %d", step)
		switch op := rng.IntN(100); {
		case op < 45:
			var size int64
			switch r := rng.IntN(10); {
			case r < 5:
				size = rng.Int64N(config.SmallSize + 64)
			case r < 8:
				size = config.SmallSize + rng.Int64N(9*config.MiB)
			default:
				size = 10*config.MiB + rng.Int64N(50*config.MiB)
			}
			s := streams[rng.IntN(len(streams))]
			p, err := e.a.Malloc(size, s)
			where += fmt.Sprintf(" malloc(%d)", size)
			if err != nil {
				if !errors.Is(err, ErrOutOfMemory) {
					t.Fatalf("%s: %v", where, err)
				}
				ooms++
				break
			}
			if p == 0 {
				if size != 0 {
					t.Fatalf("%s: address 0", where)
				}
				break
			}
			if _, dup := live[p]; dup {
				t.Fatalf("%s: %#x handed out twice", where, p)
			}
			live[p] = size
			ptrs = append(ptrs, p)
		case op < 80:
			if len(ptrs) == 0 {
				break
			}
			i := rng.IntN(len(ptrs))
			p := ptrs[i]
			ptrs = slices.Delete(ptrs, i, i+1)
			delete(live, p)
			where += fmt.Sprintf(" free(%#x)", p)
			if err := e.a.Free(p); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case op < 88:
			if len(ptrs) == 0 {
				break
			}
			p := ptrs[rng.IntN(len(ptrs))]
			s := streams[rng.IntN(len(streams))]
			if err := e.dev.Launch(s, time.Duration(rng.IntN(5)+1)*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			where += fmt.Sprintf(" record_stream(%#x)", p)
			if err := e.a.RecordStream(p, s); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		case op < 95:
			e.clock.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
		case op < 97:
			where += " empty_cache"
			if err := e.a.EmptyCache(); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
		default:
			f := 0.5 + rng.Float64()/2
			if rng.IntN(3) == 0 {
				f = 1
			}
			where += fmt.Sprintf(" fraction(%.2f)", f)
			if err := e.a.SetMemoryFraction(f); err != nil {
				t.Fatal(err)
			}
		}
		snap := checkInvariants(t, e, live, where)
		for _, seg := range snap.Segments {
			for _, b := range seg.Blocks {
				if b.State == snapshot.StateActivePendingFree {
					pendingSeen++
				}
			}
		}
	}
	if pendingSeen == 0 {
		t.Fatal("no step ever had an active_pending_free block: record_stream frees untested")
	}
	s := checkInvariants(t, e, live, "end")
	checkReplay(t, s)
	if len(s.DeviceTraces[0]) < steps/2 {
		t.Fatalf("only %d trace entries after %d steps", len(s.DeviceTraces[0]), steps)
	}
	t.Logf("%d steps, %d live, %d OOMs, %d segments, %d trace entries", steps, len(live), ooms, len(s.Segments), len(s.DeviceTraces[0]))
}

// FuzzOps interprets the input as an operation sequence (3 bytes per op)
// on a small device with several configurations and checks the invariants
// after every step and the trace replay at the end.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 10, 1, 0, 200, 2, 1, 0, 0, 2, 0, 1, 3, 0, 0})
	f.Add([]byte{5, 0, 0, 0, 255, 3, 0, 255, 3, 0, 255, 3, 4, 0, 0, 1, 1, 0})
	confs := []string{"", "expandable_segments:True", "max_split_size_mb:20,garbage_collection_threshold:0.5"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 3*400 {
			return
		}
		ci := int(data[0]) % len(confs)
		e := newEnv(t, confs[ci], data[0]&0x80 != 0, 128*config.MiB)
		streams := []acl.Stream{e.stream(), e.stream()}
		live := map[uint64]int64{}
		var ptrs []uint64
		for i := 1; i+2 < len(data); i += 3 {
			op, x, y := data[i]%6, int64(data[i+1]), int64(data[i+2])
			s := streams[y%2]
			switch op {
			case 0, 1: // malloc: x scales the size, y picks stream and size class
				size := x * 4096 * (1 + (y/2)%64)
				p, err := e.a.Malloc(size, s)
				switch {
				case err == nil && p != 0:
					live[p] = size
					ptrs = append(ptrs, p)
				case err == nil && size != 0:
					t.Fatalf("Malloc(%d) returned address 0", size)
				case err != nil && !errors.Is(err, ErrOutOfMemory):
					t.Fatal(err)
				}
			case 2:
				if len(ptrs) > 0 {
					j := int(x) % len(ptrs)
					p := ptrs[j]
					ptrs = slices.Delete(ptrs, j, j+1)
					delete(live, p)
					if err := e.a.Free(p); err != nil {
						t.Fatal(err)
					}
				}
			case 3:
				if len(ptrs) > 0 {
					_ = e.dev.Launch(s, time.Duration(y)*time.Microsecond)
					if err := e.a.RecordStream(ptrs[int(x)%len(ptrs)], s); err != nil {
						t.Fatal(err)
					}
				}
			case 4:
				e.clock.Advance(time.Duration(x) * time.Microsecond)
				if y%8 == 0 {
					_ = e.a.EmptyCache()
				}
			case 5:
				_ = e.a.SetMemoryFraction(float64(x) / 255)
			}
			checkInvariants(t, e, live, fmt.Sprintf("op %d", i/3))
		}
		checkReplay(t, checkInvariants(t, e, live, "end"))
	})
}
