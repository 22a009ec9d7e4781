package allocator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

// seq renders a trace as "action size" items for compact comparisons.
func seq(tr []snapshot.TraceEntry) []string {
	out := make([]string, len(tr))
	for i, e := range tr {
		out[i] = fmt.Sprintf("%s %d", e.Action, e.Size)
	}
	return out
}

func wantSeq(t *testing.T, tr []snapshot.TraceEntry, want ...string) {
	t.Helper()
	if got := seq(tr); !slices.Equal(got, want) {
		t.Fatalf("trace\n got %q\nwant %q", got, want)
	}
}

func (e *testEnv) wantStats(kv map[string]int64) {
	e.t.Helper()
	m := e.a.Stats().Map()
	for k, v := range kv {
		got, ok := m[k]
		if !ok || got != v {
			e.t.Errorf("stat %s = %d (%v), want %d", k, got, ok, v)
		}
	}
}

func TestPoolChoiceExactMiB(t *testing.T) {
	// With the NPU pad an exactly-1 MiB tensor is a large-pool allocation
	// in a 20 MiB segment; on CUDA it stays in a 2 MiB small segment.
	for i, tt := range []struct {
		cuda    bool
		segment int64
		large   bool
	}{{false, 20 * config.MiB, true}, {true, 2 * config.MiB, false}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t, "", tt.cuda, 0)
			e.malloc(config.MiB, e.stream())
			wantSeq(t, e.trace(), fmt.Sprintf("segment_alloc %d", tt.segment), fmt.Sprintf("alloc %d", config.MiB))
			if s := e.a.Snapshot(); s.Segments[0].IsLarge != tt.large {
				t.Errorf("cuda=%v: segment large=%v, want %v", tt.cuda, s.Segments[0].IsLarge, tt.large)
			}
		})
	}
}

func TestBestFitSameStreamSmallestLowest(t *testing.T) {
	e := newEnv(t, "", true, 0)
	s1, s2 := e.stream(), e.stream()
	a12 := e.malloc(12*config.MiB, s1)
	a16 := e.malloc(16*config.MiB, s1)
	a14 := e.malloc(14*config.MiB, s1)
	b12 := e.malloc(12*config.MiB, s1)
	for _, p := range []uint64{a12, a16, a14, b12} {
		e.free(p)
	}
	if got := e.malloc(13*config.MiB, s1); got != a14 {
		t.Errorf("13 MiB got %#x, want the 14 MiB block %#x (smallest that fits)", got, a14)
	}
	lo := min(a12, b12)
	if got := e.malloc(12*config.MiB, s1); got != lo {
		t.Errorf("12 MiB got %#x, want the lower of two equal blocks %#x", got, lo)
	}
	n := len(e.trace())
	p := e.malloc(12*config.MiB, s2)
	if p == a12 || p == b12 {
		t.Errorf("stream 2 reused a stream-1 block %#x", p)
	}
	wantSeq(t, e.trace()[n:], fmt.Sprintf("segment_alloc %d", 12*config.MiB), fmt.Sprintf("alloc %d", 12*config.MiB))
	// 13 MiB in the 14 MiB block: the 1 MiB remainder is not > kSmallSize,
	// so the whole block is allocated.
	e.wantStats(map[string]int64{"allocated_bytes.large_pool.current": 14*config.MiB + 12*config.MiB + 12*config.MiB, "requested_bytes.all.current": 13*config.MiB + 24*config.MiB})
}

func TestSplitRules(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	e.malloc(19*config.MiB, s) // 19 MiB + 512 in a 20 MiB segment: remainder < 1 MiB stays inside
	e.malloc(5*config.MiB, s)  // 5 MiB + 512 in a new 20 MiB segment: remainder 15 MiB is split off
	e.wantStats(map[string]int64{
		"allocated_bytes.all.current":       20*config.MiB + 5*config.MiB + 512,
		"requested_bytes.all.current":       24 * config.MiB,
		"segment.large_pool.current":        2,
		"inactive_split.large_pool.current": 1,
		"inactive_split_bytes.all.current":  15*config.MiB - 512,
	})
	snap := e.a.Snapshot()
	if n := len(snap.Segments[0].Blocks) + len(snap.Segments[1].Blocks); n != 3 {
		t.Errorf("%d blocks, want 1 + 2", n)
	}
}

func TestSplitAndMergeSmallPool(t *testing.T) {
	e := newEnv(t, "", true, 0)
	s := e.stream()
	p1, p2, p3 := e.malloc(1000, s), e.malloc(1000, s), e.malloc(1000, s)
	if p2 != p1+1024 || p3 != p2+1024 {
		t.Fatalf("front splits at %#x %#x %#x, want consecutive 1024-B blocks", p1, p2, p3)
	}
	e.wantStats(map[string]int64{"inactive_split.small_pool.current": 1, "inactive_split_bytes.small_pool.current": 2*config.MiB - 3072})
	e.free(p2)
	e.wantStats(map[string]int64{"inactive_split.small_pool.current": 2, "inactive_split_bytes.small_pool.current": 2*config.MiB - 2048})
	e.free(p1) // merges with the free p2
	e.wantStats(map[string]int64{"inactive_split.small_pool.current": 2, "inactive_split_bytes.small_pool.current": 2*config.MiB - 1024})
	e.free(p3) // merges both sides: the segment is whole again
	e.wantStats(map[string]int64{"inactive_split.small_pool.current": 0, "inactive_split_bytes.small_pool.current": 0,
		"active.all.current": 0, "segment.all.current": 1})
	if b := e.a.Snapshot().Segments[0].Blocks; len(b) != 1 || b[0].Size != 2*config.MiB {
		t.Fatalf("blocks %+v, want one 2 MiB block", b)
	}
}

func TestOversizeRules(t *testing.T) {
	e := newEnv(t, "max_split_size_mb:20", true, 0)
	s := e.stream()
	a := e.malloc(30*config.MiB, s)
	e.wantStats(map[string]int64{"oversize_allocations.current": 1, "oversize_segments.current": 1})
	e.free(a)
	e.wantStats(map[string]int64{"oversize_allocations.current": 0, "oversize_segments.current": 1})
	n := len(e.trace())
	// Rule 1: a normal request does not take the cached 30 MiB block.
	if p := e.malloc(5*config.MiB, s); p == a {
		t.Fatal("5 MiB request got the oversize block")
	}
	wantSeq(t, e.trace()[n:], fmt.Sprintf("segment_alloc %d", 20*config.MiB), fmt.Sprintf("alloc %d", 5*config.MiB))
	// An oversize request takes a cached oversize block within the slack.
	if p := e.malloc(25*config.MiB, s); p != a {
		t.Fatalf("25 MiB got %#x, want the cached 30 MiB block %#x", p, a)
	}
	e.wantStats(map[string]int64{"allocated_bytes.all.current": 5*config.MiB + 30*config.MiB, "oversize_allocations.current": 1})
	e.free(a)
	// Rule 2: an oversize request needs a block < size + max_non_split_rounding.
	n = len(e.trace())
	c := e.malloc(60*config.MiB, s)
	e.free(c)
	if p := e.malloc(35*config.MiB, s); p == c {
		t.Fatal("35 MiB request took the 60 MiB block despite max_non_split_rounding")
	}
	wantSeq(t, e.trace()[n:],
		fmt.Sprintf("segment_alloc %d", 60*config.MiB), fmt.Sprintf("alloc %d", 60*config.MiB),
		fmt.Sprintf("free_requested %d", 60*config.MiB), fmt.Sprintf("free_completed %d", 60*config.MiB),
		fmt.Sprintf("segment_alloc %d", 36*config.MiB), fmt.Sprintf("alloc %d", 35*config.MiB))
}

func TestStreamDeferredFree(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s1, s2 := e.stream(), e.stream()
	p := e.malloc(1000, s1)
	if err := e.dev.Launch(s2, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := e.a.RecordStream(p, s2); err != nil {
		t.Fatal(err)
	}
	e.free(p)
	wantSeq(t, e.trace(), "segment_alloc 2097152", "alloc 1000", "free_requested 1000")
	if b := e.a.Snapshot().Segments[0].Blocks[0]; b.State != snapshot.StateActivePendingFree || b.RequestedSize != 1000 {
		t.Fatalf("block %+v, want active_pending_free", b)
	}
	e.wantStats(map[string]int64{"allocated_bytes.all.current": 0, "active_bytes.all.current": 1536, "requested_bytes.all.current": 1000})
	q := e.malloc(1000, s1) // event not complete: the block is not reusable
	if q == p {
		t.Fatal("pending-free block reused before its event completed")
	}
	e.clock.Advance(5 * time.Millisecond)
	n := len(e.trace())
	if r := e.malloc(1000, s1); r != p {
		t.Fatalf("after the event completed got %#x, want %#x", r, p)
	}
	wantSeq(t, e.trace()[n:], "free_completed 1000", "alloc 1000")
}

func TestRecordStreamOnAllocationStream(t *testing.T) {
	// torch_npu does not filter the allocation stream (the free waits on an
	// event); CUDA ignores it (the free completes at once).
	for _, cuda := range []bool{false, true} {
		e := newEnv(t, "", cuda, 0)
		s := e.stream()
		p := e.malloc(1000, s)
		if err := e.dev.Launch(s, time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if err := e.a.RecordStream(p, s); err != nil {
			t.Fatal(err)
		}
		e.free(p)
		want := []string{"segment_alloc 2097152", "alloc 1000", "free_requested 1000"}
		if cuda {
			want = append(want, "free_completed 1000")
		}
		wantSeq(t, e.trace(), want...)
	}
}

func TestEmptyCacheSynchronizesPendingFrees(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s1, s2 := e.stream(), e.stream()
	p := e.malloc(4*config.MiB, s1)
	_ = e.dev.Launch(s2, time.Second)
	_ = e.a.RecordStream(p, s2)
	e.free(p)
	if err := e.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, e.trace()[2:], fmt.Sprintf("free_requested %d", 4*config.MiB), fmt.Sprintf("free_completed %d", 4*config.MiB), fmt.Sprintf("segment_free %d", 20*config.MiB))
	e.wantStats(map[string]int64{"num_sync_all_streams": 1, "reserved_bytes.all.current": 0, "segment.all.freed": 1, "num_device_free": 1})
	if used := e.dev.Info().HBMUsed; used != 0 {
		t.Fatalf("acl still reports %d bytes used", used)
	}
}

func TestRetryChainFreesCacheThenRetries(t *testing.T) {
	e := newEnv(t, "", false, 64*config.MiB)
	s := e.stream()
	e.free(e.malloc(30*config.MiB, s)) // caches a 32 MiB segment
	n := len(e.trace())
	e.malloc(40*config.MiB, s) // needs 42 MiB: only after releasing the cache
	wantSeq(t, e.trace()[n:], fmt.Sprintf("segment_free %d", 32*config.MiB), fmt.Sprintf("segment_alloc %d", 42*config.MiB), fmt.Sprintf("alloc %d", 40*config.MiB))
	e.wantStats(map[string]int64{"num_alloc_retries": 1, "num_sync_all_streams": 1, "num_ooms": 0, "num_device_alloc": 2, "num_device_free": 1})
}

func TestOOM(t *testing.T) {
	e := newEnv(t, "", false, 64*config.MiB)
	s := e.stream()
	e.malloc(40*config.MiB, s)
	var got []int64
	detach := e.a.AttachOOMObserver(func(dev int, allocSize, limit, free int64) { got = []int64{int64(dev), allocSize, limit, free} })
	defer detach()
	n := len(e.trace())
	_, err := e.a.Malloc(30*config.MiB, s)
	var oom *OOMError
	if !errors.As(err, &oom) || !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("err %v, want *OOMError", err)
	}
	want := "NPU out of memory. Tried to allocate 32.00 MiB (NPU 0; 64.00 MiB total capacity; 40.00 MiB already allocated; " +
		"40.00 MiB current active; 22.00 MiB free; 42.00 MiB reserved in total by PyTorch).If reserved memory is >> allocated memory " +
		"try setting max_split_size_mb to avoid fragmentation."
	if err.Error() != want {
		t.Fatalf("message\n got %q\nwant %q", err, want)
	}
	tr := e.trace()[n:]
	wantSeq(t, tr, fmt.Sprintf("oom %d", 30*config.MiB+512))
	if tr[0].DeviceFree != 22*config.MiB || tr[0].Addr != 0 {
		t.Fatalf("oom entry %+v, want device_free 22 MiB", tr[0])
	}
	if !slices.Equal(got, []int64{0, 32 * config.MiB, 64 * config.MiB, 22 * config.MiB}) {
		t.Fatalf("observer got %v", got)
	}
	e.wantStats(map[string]int64{"num_ooms": 1, "num_alloc_retries": 1, "num_sync_all_streams": 1})

	// With a fraction the limit applies before the device and shows up.
	if err := e.a.SetMemoryFraction(0.75); err != nil {
		t.Fatal(err)
	}
	_, err = e.a.Malloc(2*config.MiB, s)
	if err == nil || !strings.Contains(err.Error(), "; 48.00 MiB allowed; 42.00 MiB reserved") {
		t.Fatalf("fraction OOM: %v", err)
	}
	if _, err := e.a.Malloc(1<<60, s); err == nil || err.Error() != "NPU out of memory. Tried to allocate more than 1EB memory." {
		t.Fatalf("1 EB: %v", err)
	}
}

func TestOOMMessageCUDA(t *testing.T) {
	e := newEnv(t, "", true, 64*config.MiB)
	s := e.stream()
	e.malloc(40*config.MiB, s)
	_, err := e.a.Malloc(30*config.MiB, s)
	want := "CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 64.00 MiB of which 24.00 MiB is free. " +
		"Of the allocated memory 40.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. " +
		"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  " +
		"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
	if err == nil || err.Error() != want {
		t.Fatalf("message\n got %v\nwant %s", err, want)
	}
	tr := e.trace()
	if last := tr[len(tr)-1]; last.Action != snapshot.ActionOOM || last.Size != 30*config.MiB {
		t.Fatalf("last entry %+v", last)
	}
}

func TestReleaseAvailableCachedBlocks(t *testing.T) {
	e := newEnv(t, "max_split_size_mb:20", true, 100*config.MiB)
	s := e.stream()
	a, b := e.malloc(25*config.MiB, s), e.malloc(70*config.MiB, s)
	e.free(a)
	e.free(b)
	n := len(e.trace())
	// 45 MiB: the 70 MiB block breaks the slack rule and the device is
	// full, so the smallest oversize block ≥ 45 MiB is released, no sync.
	e.malloc(45*config.MiB, s)
	wantSeq(t, e.trace()[n:], fmt.Sprintf("segment_free %d", 70*config.MiB), fmt.Sprintf("segment_alloc %d", 46*config.MiB), fmt.Sprintf("alloc %d", 45*config.MiB))
	e.wantStats(map[string]int64{"num_alloc_retries": 0, "num_sync_all_streams": 0, "oversize_segments.current": 2})

	// No single block is big enough: largest oversize blocks go first.
	e2 := newEnv(t, "max_split_size_mb:20", true, 100*config.MiB)
	x, y := e2.malloc(40*config.MiB, s), e2.malloc(30*config.MiB, s)
	e2.free(x)
	e2.free(y)
	n = len(e2.trace())
	e2.malloc(50*config.MiB, s)
	wantSeq(t, e2.trace()[n:], fmt.Sprintf("segment_free %d", 40*config.MiB), fmt.Sprintf("segment_free %d", 30*config.MiB), fmt.Sprintf("segment_alloc %d", 50*config.MiB), fmt.Sprintf("alloc %d", 50*config.MiB))
}

func TestGarbageCollection(t *testing.T) {
	// CUDA sets a fraction even at 1.0, so GC runs: reserved 60 MiB is over
	// 0.5 × 100 MiB and both unsplit cached segments (same age) go, without
	// a synchronisation or a retry.
	e := newEnv(t, "garbage_collection_threshold:0.5", true, 100*config.MiB)
	s := e.stream()
	if err := e.a.SetMemoryFraction(1); err != nil {
		t.Fatal(err)
	}
	a, b := e.malloc(30*config.MiB, s), e.malloc(30*config.MiB, s)
	e.free(a)
	e.free(b)
	n := len(e.trace())
	e.malloc(35*config.MiB, s)
	wantSeq(t, e.trace()[n:], fmt.Sprintf("segment_free %d", 30*config.MiB), fmt.Sprintf("segment_free %d", 30*config.MiB), fmt.Sprintf("segment_alloc %d", 36*config.MiB), fmt.Sprintf("alloc %d", 35*config.MiB))
	e.wantStats(map[string]int64{"num_alloc_retries": 0, "num_sync_all_streams": 0})

	// torch_npu treats fraction 1.0 as unset: no GC, the cache stays.
	e2 := newEnv(t, "garbage_collection_threshold:0.5", false, 100*config.MiB)
	_ = e2.a.SetMemoryFraction(1)
	a, b = e2.malloc(30*config.MiB, s), e2.malloc(30*config.MiB, s)
	e2.free(a)
	e2.free(b)
	n = len(e2.trace())
	e2.malloc(35*config.MiB, s)
	wantSeq(t, e2.trace()[n:], fmt.Sprintf("segment_alloc %d", 36*config.MiB), fmt.Sprintf("alloc %d", 35*config.MiB))
}

func TestGarbageCollectionAge(t *testing.T) {
	// Only blocks at least as old as the average are collected: a block
	// freed before several cache searches goes, a fresh one stays.
	e := newEnv(t, "garbage_collection_threshold:0.4", true, 100*config.MiB)
	_ = e.a.SetMemoryFraction(1)
	s, s2 := e.stream(), e.stream()
	old, young := e.malloc(20*config.MiB, s), e.malloc(20*config.MiB, s)
	e.free(old)
	for range 3 { // large-pool searches on another stream age the cached block
		e.free(e.malloc(12*config.MiB, s2))
	}
	e.free(young)
	n := len(e.trace())
	e.malloc(24*config.MiB, s)
	tr := e.trace()[n:]
	var freed []uint64
	for _, te := range tr {
		if te.Action == snapshot.ActionSegmentFree {
			freed = append(freed, te.Addr)
		}
	}
	if !slices.Contains(freed, old) || slices.Contains(freed, young) {
		t.Fatalf("GC freed %x; want the old block %#x and not the young %#x (trace %q)", freed, old, young, seq(tr))
	}
}

func TestPerProcessFractionConfig(t *testing.T) {
	e := newEnv(t, "per_process_memory_fraction:0.5", false, 100*config.MiB)
	s := e.stream()
	e.malloc(40*config.MiB, s)
	if _, err := e.a.Malloc(10*config.MiB, s); !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "50.00 MiB allowed; ") {
		t.Fatalf("err %v, want OOM at the 50 MiB limit", err)
	}
	if err := e.a.SetMemoryFraction(1.5); err == nil || err.Error() != "invalid fraction:1.5. Please set within [0, 1]." {
		t.Fatalf("SetMemoryFraction(1.5): %v", err)
	}
}

func TestThrowOnMallocOOMRejects(t *testing.T) {
	e := newEnv(t, "throw_on_npumalloc_oom:True,per_process_memory_fraction:0.5", false, 100*config.MiB)
	// The fraction limit check comes first in alloc_block; with the limit
	// lifted the configured fraction still rejects preemptively.
	_ = e.a.SetMemoryFraction(1)
	s := e.stream()
	e.malloc(40*config.MiB, s)
	_, err := e.a.Malloc(30*config.MiB, s)
	var oom *OOMError
	if !errors.As(err, &oom) || !oom.Rejected {
		t.Fatalf("err %v, want a preemptive rejection", err)
	}
	e.wantStats(map[string]int64{"num_oom_rejections": 1, "num_ooms": 0})
}

func TestExpandableSegmentsMapUnmap(t *testing.T) {
	e := newEnv(t, "expandable_segments:True", false, 0)
	s := e.stream()
	a := e.malloc(3*config.MiB, s)
	b := e.malloc(5*config.MiB, s)
	if b != a+uint64(3*config.MiB+16*config.KiB) {
		t.Fatalf("second block at %#x, want right after the first at the next 16 KiB", b)
	}
	e.wantStats(map[string]int64{"reserved_bytes.all.current": 20 * config.MiB, "segment.all.current": 0, "num_device_alloc": 1,
		"inactive_split.all.current": 0})
	c := e.malloc(25*config.MiB, s) // the free tail of page 1 plus one more mapped page
	e.free(a)
	e.free(b)
	e.free(c)
	if err := e.a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	wantSeq(t, e.trace(),
		fmt.Sprintf("segment_map %d", 20*config.MiB), fmt.Sprintf("alloc %d", 3*config.MiB), fmt.Sprintf("alloc %d", 5*config.MiB),
		fmt.Sprintf("segment_map %d", 20*config.MiB), fmt.Sprintf("alloc %d", 25*config.MiB),
		fmt.Sprintf("free_requested %d", 3*config.MiB), fmt.Sprintf("free_completed %d", 3*config.MiB),
		fmt.Sprintf("free_requested %d", 5*config.MiB), fmt.Sprintf("free_completed %d", 5*config.MiB),
		fmt.Sprintf("free_requested %d", 25*config.MiB), fmt.Sprintf("free_completed %d", 25*config.MiB),
		fmt.Sprintf("segment_unmap %d", 40*config.MiB))
	e.wantStats(map[string]int64{"reserved_bytes.all.current": 0, "num_device_free": 1, "segment.all.allocated": 0})
	if used := e.dev.Info().HBMUsed; used != 0 {
		t.Fatalf("acl reports %d bytes used after unmapping", used)
	}
}

func TestExpandableSnapshotOneSegmentPerMappedRange(t *testing.T) {
	e := newEnv(t, "expandable_segments:True", false, 0)
	s := e.stream()
	a := e.malloc(19*config.MiB, s)
	b := e.malloc(45*config.MiB, s)
	e.malloc(19*config.MiB, s)
	e.free(b)
	if err := e.a.EmptyCache(); err != nil { // unmaps the two whole free pages in the middle
		t.Fatal(err)
	}
	snap := e.a.Snapshot()
	if len(snap.Segments) != 2 || !snap.Segments[0].IsExpandable || snap.Segments[0].Address != a {
		for _, sg := range snap.Segments {
			t.Logf("segment %#x %d", sg.Address, sg.TotalSize)
		}
		t.Fatalf("%d segments, want two mapped ranges of one expandable segment", len(snap.Segments))
	}
	tr := e.trace()
	if last := tr[len(tr)-1]; last.Action != snapshot.ActionSegmentUnmap || last.Size != 40*config.MiB || last.Addr != a+uint64(20*config.MiB) {
		t.Fatalf("last entry %s %#x %d, want segment_unmap of pages 2–3", last.Action, last.Addr, last.Size)
	}
}

func TestExpandableBaseAddressAlignment(t *testing.T) {
	for _, tt := range []struct {
		conf    string
		aligned bool
	}{{"expandable_segments:True", true}, {"expandable_segments:True,base_addr_aligned_kb:0", false}} {
		t.Run(tt.conf, func(t *testing.T) {
			e := newEnv(t, tt.conf, false, 0)
			s := e.stream()
			a := e.malloc(3*config.MiB, s)
			b := e.malloc(2*config.MiB, s)
			if tt.aligned {
				if b%(16*1024) != 0 || b != a+uint64(3*config.MiB+16*1024) {
					t.Errorf("%s: block at %#x, want 16 KiB aligned right after %#x", tt.conf, b, a)
				}
				blocks := e.a.Snapshot().Segments[0].Blocks
				if blocks[1].State != snapshot.StateInactive || blocks[1].Size != 16*1024-512 {
					t.Errorf("%s: lead block %+v, want a free 15.5 KiB block", tt.conf, blocks[1])
				}
			} else if b != a+uint64(3*config.MiB+512) {
				t.Errorf("%s: block at %#x, want %#x", tt.conf, b, a+uint64(3*config.MiB+512))
			}
		})
	}
}

func TestExpandableToggledOff(t *testing.T) {
	// Turning expandable segments off later: cached expandable blocks are
	// skipped and a plain segment is allocated instead.
	e := newEnv(t, "expandable_segments:True", false, 0)
	s := e.stream()
	e.free(e.malloc(3*config.MiB, s))
	if err := e.a.SetAllocatorSettings("expandable_segments:False"); err != nil {
		t.Fatal(err)
	}
	n := len(e.trace())
	e.malloc(3*config.MiB, s)
	wantSeq(t, e.trace()[n:], fmt.Sprintf("segment_alloc %d", 20*config.MiB), fmt.Sprintf("alloc %d", 3*config.MiB))
}

func TestFreeErrors(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	if p, err := e.a.Malloc(0, s); p != 0 || err != nil {
		t.Fatalf("Malloc(0) = %#x, %v; want 0, nil", p, err)
	}
	if err := e.a.Free(0); err != nil || len(e.trace()) != 0 {
		t.Fatalf("Free(0): %v, trace %q", err, seq(e.trace()))
	}
	if _, err := e.a.Malloc(-1, s); err == nil {
		t.Fatal("negative size accepted")
	}
	p := e.malloc(100, s)
	e.free(p)
	if err := e.a.Free(p); !errors.Is(err, ErrInvalidPointer) {
		t.Fatalf("double free: %v", err)
	}
	if err := e.a.Free(0xdead); !errors.Is(err, ErrInvalidPointer) {
		t.Fatalf("unknown pointer: %v", err)
	}
	if err := e.a.RecordStream(p, s); !errors.Is(err, ErrInvalidPointer) {
		t.Fatalf("record_stream on freed: %v", err)
	}
}

func TestDeviceFaultPropagates(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	e.dev.FailNthMalloc(1) // the first device malloc fails; the retry succeeds
	if _, err := e.a.Malloc(100, s); err != nil {
		t.Fatalf("injected allocation failure: %v, want success on retry", err)
	}
	e.wantStats(map[string]int64{"num_ooms": 0, "num_alloc_retries": 1, "num_sync_all_streams": 1})
	if _, err := e.a.Malloc(100, acl.Stream(12345)); err != nil {
		t.Fatalf("malloc on a stream the allocator never saw: %v", err)
	}
}

func TestStatsResetAndSummary(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	e.free(e.malloc(5*config.MiB, s))
	e.a.ResetPeakStats()
	e.wantStats(map[string]int64{"allocated_bytes.all.peak": 0, "reserved_bytes.all.peak": 20 * config.MiB})
	e.a.ResetAccumulatedStats()
	e.wantStats(map[string]int64{"allocation.all.allocated": 0, "num_device_alloc": 0, "reserved_bytes.all.current": 20 * config.MiB})
	sum := e.a.Summary()
	for _, want := range []string{"PyTorch NPU memory summary, device ID 0", "NPU reserved memory    |  20480 KiB", "Oversize NPU segments"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	st := e.a.Stats()
	for k, v := range st.Map() {
		if got, ok := st.Get(k); !ok || got != v {
			t.Errorf("Get(%q) = %d, %v; Map has %d", k, got, ok, v)
		}
	}
	for _, bad := range []string{"", "allocation", "allocation.all", "allocation.huge.current", "allocation.all.max", "nope.all.current", "oversize_segments.peak.x"} {
		if _, ok := st.Get(bad); ok {
			t.Errorf("Get(%q) found a value", bad)
		}
	}
	keys := e.a.Stats().Keys()
	if len(keys) != 9*3*4+2*4+7 || !slices.IsSorted(keys) || !slices.Contains(keys, "inactive_split_bytes.small_pool.freed") {
		t.Fatalf("%d keys: %v", len(keys), keys)
	}
}

func TestExpandableMapRoundsOutToPages(t *testing.T) {
	e := newEnv(t, "expandable_segments:True", false, 0)
	s := e.stream()
	e.malloc(25*config.MiB, s)
	e.malloc(100, s) // small pool: its own segment with 2 MiB pages
	wantSeq(t, e.trace(), fmt.Sprintf("segment_map %d", 40*config.MiB), fmt.Sprintf("alloc %d", 25*config.MiB),
		fmt.Sprintf("segment_map %d", 2*config.MiB), "alloc 100")
	e.wantStats(map[string]int64{"reserved_bytes.large_pool.current": 40 * config.MiB, "reserved_bytes.small_pool.current": 2 * config.MiB, "num_device_alloc": 2})
}

func TestSetAllocatorSettings(t *testing.T) {
	e := newEnv(t, "max_split_size_mb:40", false, 0)
	if err := e.a.SetAllocatorSettings("roundup_power2_divisions:4"); err == nil ||
		err.Error() != "torch_npu.npu.memory._set_allocator_settings() unsupported setting: roundup_power2_divisions" {
		t.Fatalf("err %v", err)
	}
	if err := e.a.SetAllocatorSettings("expandable_segments:True"); err != nil {
		t.Fatalf("max_split_size is reset by every parse, so expandable is allowed: %v", err)
	}
	if c := e.a.Config(); !c.ExpandableSegments || c.MaxSplitSize != config.Unlimited {
		t.Fatalf("config %+v", c)
	}
	if err := e.a.SetAllocatorSettings("expandable_segments:True,max_split_size_mb:40"); err == nil {
		t.Fatal("expandable with max_split_size_mb accepted")
	}
	if err := e.a.SetAllocatorSettings("per_process_memory_fraction:0.25"); err != nil {
		t.Fatal(err)
	}
	s := e.stream()
	if _, err := e.a.Malloc(20*config.GiB, s); !errors.Is(err, ErrOutOfMemory) {
		t.Fatalf("20 GiB under a 25%% fraction of 61 GiB: %v", err)
	}
}
