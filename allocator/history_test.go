package allocator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

func TestRingBufferKeepsNewestOldestFirst(t *testing.T) {
	e := newEnv(t, "", true, 0)
	s := e.stream()
	e.a.RecordHistory(true, RecordAll, 4)
	var ptrs []uint64
	for range 3 {
		ptrs = append(ptrs, e.malloc(1000, s)) // segment_alloc + 3 allocs
	}
	e.free(ptrs[0])
	tr := e.a.Snapshot().DeviceTraces[0]
	// 6 entries were recorded before the snapshot entry; a ring of 4
	// keeps the newest, oldest first.
	wantSeq(t, tr, "alloc 1000", "free_requested 1000", "free_completed 1000", "snapshot 2048")
	if tr[0].Addr != ptrs[2] {
		t.Fatalf("oldest kept entry is alloc %#x, want %#x", tr[0].Addr, ptrs[2])
	}
	// Every RecordHistory call clears, as torch_npu's does.
	e.a.RecordHistory(true, RecordAll, 100)
	e.free(ptrs[1])
	wantSeq(t, e.a.Snapshot().DeviceTraces[0], "free_requested 1000", "free_completed 1000", "snapshot 1024")
	e.a.RecordHistory(false, RecordAll, 100)
	e.free(ptrs[2])
	if tr := e.a.Snapshot().DeviceTraces[0]; len(tr) != 0 {
		t.Fatalf("history off: %d entries", len(tr))
	}
	e.a.RecordHistory(true, RecordAll, 0) // ≤ 0 means one entry
	e.malloc(1, s)
	wantSeq(t, e.a.Snapshot().DeviceTraces[0], "snapshot 512")
}

func TestTraceTimesFollowInjectedClock(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	p := e.malloc(100, s)
	e.clock.Advance(1500 * time.Microsecond)
	e.free(p)
	tr := e.trace()
	t0 := epoch.UnixMicro()
	want := []int64{t0, t0, t0 + 1500, t0 + 1500}
	for i, te := range tr {
		if te.TimeUS != want[i] {
			t.Fatalf("entry %d (%s) at %d, want %d", i, te.Action, te.TimeUS, want[i])
		}
	}
	snap := e.a.Snapshot()
	if !snap.HasTimestamps() || snap.Settings == nil || snap.Settings.ConfKey != "PYTORCH_NPU_ALLOC_CONF" {
		t.Fatalf("snapshot lacks times or settings: %+v", snap.Settings)
	}
}

func TestTraceTimesFromCalibratedTicks(t *testing.T) {
	rt := acl.NewRuntime(acl.Config{})
	dev, _ := rt.Device(0)
	a, err := New(dev, config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a.RecordHistory(true, RecordAll, 1000)
	before := time.Now().UnixMicro()
	for range 50 {
		p, err := a.Malloc(4096, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Microsecond)
		_ = a.Free(p)
	}
	after := time.Now().UnixMicro()
	tr := a.Snapshot().DeviceTraces[0]
	if len(tr) != 1+150+1 {
		t.Fatalf("%d entries", len(tr))
	}
	for i, te := range tr[:len(tr)-1] {
		// The calibration is good to well under a millisecond; allow slack
		// for a loaded machine.
		if te.TimeUS < before-2000 || te.TimeUS > after+2000 {
			t.Fatalf("entry %d at %d µs, outside [%d, %d]", i, te.TimeUS, before, after)
		}
		if i > 0 && te.TimeUS < tr[i-1].TimeUS {
			t.Fatalf("entry %d goes back in time", i)
		}
	}
	if tr[len(tr)-2].TimeUS-tr[0].TimeUS < 50*20 {
		t.Fatalf("trace spans %d µs, want ≥ 1000 (50 sleeps of 20 µs)", tr[len(tr)-2].TimeUS-tr[0].TimeUS)
	}
}

func TestConverterRecoversLinearClock(t *testing.T) {
	// Ticks at 2.5 per ns with jitter on some pairs: the median scale and
	// correction recover the mapping.
	const base = int64(1_790_000_000_000_000_000)
	mk := func(off int64) []clockPair {
		ps := make([]clockPair, replicates)
		for i := range ps {
			wall := base + off + int64(i)*1000
			jitter := int64(0)
			if i%10 == 0 {
				jitter = 5000
			}
			ps[i] = clockPair{wall: wall + jitter, tick: int64(float64(wall-base) * 2.5)}
		}
		return ps
	}
	c := makeConverter(mk(0), mk(int64(time.Second)))
	if math.Abs(c.scale-0.4) > 1e-9 {
		t.Fatalf("scale %v, want 0.4", c.scale)
	}
	for _, wall := range []int64{base, base + 123456789, base + 2*int64(time.Second)} {
		if got := c.nanos(int64(float64(wall-base) * 2.5)); got < wall-2 || got > wall+2 {
			t.Fatalf("nanos = %d, want %d", got, wall)
		}
	}
}

func TestStacksByRecordContext(t *testing.T) {
	frames := []snapshot.Frame{{Filename: "model.py", Line: 42, Name: "forward"}, {Filename: "train.py", Line: 7, Name: "main"}}
	freeFrames := []snapshot.Frame{{Filename: "train.py", Line: 9, Name: "step"}}
	for i, tt := range []struct {
		ctx                       RecordContext
		block, alloc, segment, fr bool
	}{
		{RecordState, true, false, false, false},
		{RecordAlloc, true, true, true, false},
		{RecordAll, true, true, true, true},
		{RecordNever, false, false, false, false},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := newEnv(t, "", false, 0)
			s := e.stream()
			e.a.RecordHistory(true, tt.ctx, 100)
			p, err := e.a.MallocWithStack(1<<20-32, s, frames)
			if err != nil {
				t.Fatal(err)
			}
			snap := e.a.Snapshot()
			if got := snap.Stack(snap.Segments[0].Blocks[0].Frames); (len(got) > 0) != tt.block || (tt.block && !slices.Equal(got, snapshot.Stack(frames))) {
				t.Errorf("ctx %d: block frames %v", tt.ctx, got)
			}
			tr := snap.DeviceTraces[0]
			if got := snap.Stack(tr[0].Frames); (len(got) > 0) != tt.segment {
				t.Errorf("ctx %d: segment_alloc frames %v", tt.ctx, got)
			}
			if got := e.a.Stack(tr[1].Frames); (len(got) > 0) != tt.alloc {
				t.Errorf("ctx %d: alloc entry frames %v", tt.ctx, got)
			}
			if err := e.a.FreeWithStack(p, freeFrames); err != nil {
				t.Fatal(err)
			}
			snap = e.a.Snapshot()
			tr = snap.DeviceTraces[0]
			if got := snap.Stack(tr[3].Frames); (len(got) > 0) != tt.fr || (tt.fr && got[0] != freeFrames[0]) {
				t.Errorf("ctx %d: free_requested frames %v", tt.ctx, got)
			}
			if b := snap.Segments[0].Blocks[0]; b.Frames != snapshot.NoStack {
				t.Errorf("ctx %d: freed block keeps frames", tt.ctx)
			}
		})
	}
}

func TestTrackerSeesEveryEntryWithTime(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	e.a.RecordHistory(false, RecordNever, 1) // trackers work without history
	var mu sync.Mutex
	var got []snapshot.TraceEntry
	detach := e.a.AttachTracker(func(dev int, te snapshot.TraceEntry) {
		if dev != 0 {
			t.Errorf("device %d", dev)
		}
		mu.Lock()
		got = append(got, te)
		mu.Unlock()
	})
	p := e.malloc(5000, s)
	e.clock.Advance(time.Millisecond)
	e.free(p)
	detach() // delivers what is buffered before returning
	detach()
	e.malloc(1, s)
	mu.Lock()
	defer mu.Unlock()
	wantSeq(t, got, "segment_alloc 2097152", "alloc 5000", "free_requested 5000", "free_completed 5000")
	if got[1].Addr != p || got[1].TimeUS != epoch.UnixMicro() || got[3].TimeUS != epoch.UnixMicro()+1000 {
		t.Fatalf("entries %+v", got)
	}
}

func TestSlowTrackerDoesNotStallAllocation(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	release := make(chan struct{})
	var delivered, dropped atomic.Int64
	detach := e.a.AttachTracker(func(int, snapshot.TraceEntry) {
		<-release // a tracker stuck until released
		delivered.Add(1)
	}, WithTrackerBuffer(8), WithDropHandler(func(n uint64) { dropped.Add(int64(n)) }))
	const pairs = 500
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range pairs {
			p, err := e.a.Malloc(4096, s)
			if err != nil {
				t.Error(err)
				return
			}
			_ = e.a.Free(p)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("allocation stalled behind a blocked tracker")
	}
	close(release)
	detach()
	total := int64(1 + 3*pairs) // segment_alloc + alloc/free_requested/free_completed per pair
	if delivered.Load()+dropped.Load() != total {
		t.Fatalf("delivered %d + dropped %d != recorded %d", delivered.Load(), dropped.Load(), total)
	}
	// The callback holds the first batch it took; 8 more wait; the rest drop.
	if dropped.Load() == 0 || delivered.Load() > 100 {
		t.Fatalf("delivered %d, dropped %d: want about the buffer delivered and the rest counted as drops", delivered.Load(), dropped.Load())
	}
}

func TestConcurrentUseWithTracker(t *testing.T) {
	e := newEnv(t, "", false, 0)
	var n atomic.Int64
	detach := e.a.AttachTracker(func(int, snapshot.TraceEntry) { n.Add(1) })
	streams := []acl.Stream{e.stream(), e.stream(), e.stream(), e.stream()}
	var wg sync.WaitGroup
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				p, err := e.a.Malloc(int64(512+i*4096), s)
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					_ = e.a.RecordStream(p, streams[0])
				}
				_ = e.a.Free(p)
				if i%50 == 0 {
					_ = e.a.Snapshot()
					_ = e.a.Summary()
					if err := e.a.SetAllocatorSettings("release_lock_on_npumalloc:True"); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	_ = e.a.EmptyCache()
	detach()
	if n.Load() == 0 {
		t.Fatal("tracker saw nothing")
	}
	checkInvariants(t, e, map[uint64]int64{}, "after concurrent use")
}

func TestSnapshotAndTrackHasNoGapOrDuplicate(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	p := e.malloc(1000, s)
	var mu sync.Mutex
	var got []snapshot.TraceEntry
	snap, detach := e.a.SnapshotAndTrack(func(_ int, te snapshot.TraceEntry) {
		mu.Lock()
		got = append(got, te)
		mu.Unlock()
	})
	e.free(p)
	detach()
	if n := len(snap.Segments); n != 1 || snap.Segments[0].Blocks[0].State != snapshot.StateActiveAllocated {
		t.Fatalf("snapshot %+v", snap.Segments)
	}
	if tr := snap.DeviceTraces[0]; tr[len(tr)-1].Action != snapshot.ActionSnapshot {
		t.Fatalf("snapshot trace ends with %s", tr[len(tr)-1].Action)
	}
	wantSeq(t, got, "free_requested 1000", "free_completed 1000")
}

// TestCycleCounterCalibrates checks the counter stub itself, whether or not
// this machine's tick uses it: the counter advances, and a converter
// calibrated on it maps a read taken now onto the wall clock.
func TestCycleCounterCalibrates(t *testing.T) {
	c0 := cycleCounter()
	clk := newApproxClock(cycleCounter)
	time.Sleep(5 * time.Millisecond)
	if c1 := cycleCounter(); c1 <= c0 {
		t.Fatalf("counter did not advance over 5 ms: %d then %d", c0, c1)
	}
	conv := clk.converter()
	if conv.scale <= 0 || conv.scale > 1000 {
		t.Fatalf("calibrated %v ns per tick, want a counter between 1 MHz and a few GHz", conv.scale)
	}
	before := time.Now().UnixNano()
	got := conv.nanos(cycleCounter())
	after := time.Now().UnixNano()
	// Calibration is good to microseconds; the slack is for a loaded machine.
	if slack := int64(2 * time.Millisecond); got < before-slack || got > after+slack {
		t.Fatalf("counter read converts to %d ns, wall clock was [%d, %d]", got, before, after)
	}
}

// A batch tracker sees the same entries as a per-entry one, in batches.
func TestBatchTrackerSeesWhatATrackerSees(t *testing.T) {
	e := newEnv(t, "", false, 0)
	s := e.stream()
	var mu sync.Mutex
	var one, batched []snapshot.TraceEntry
	calls := 0
	release := make(chan struct{})
	detachOne := e.a.AttachTracker(func(_ int, te snapshot.TraceEntry) {
		mu.Lock()
		one = append(one, te)
		mu.Unlock()
	})
	detachBatch := e.a.AttachBatchTracker(func(dev int, es []snapshot.TraceEntry) {
		<-release // entries pile up meanwhile: later calls get many
		mu.Lock()
		batched = append(batched, es...)
		calls++
		mu.Unlock()
	})
	for i := range 3000 {
		p := e.malloc(int64(512+i), s)
		e.clock.Advance(time.Microsecond)
		e.free(p)
	}
	close(release)
	detachBatch()
	detachOne()
	if len(one) != 1+3*3000 || !slices.Equal(one, batched) {
		t.Fatalf("per entry %d, batched %d: not the same entries", len(one), len(batched))
	}
	if calls > 10 {
		t.Fatalf("%d calls for %d entries: not batched", calls, len(batched))
	}
}

// counterInSync passes a counter that is one line against the monotonic
// clock on every CPU and fails one that is offset or runs at another rate
// on one CPU; pinning is simulated, the clock reads are real.
func TestCounterInSync(t *testing.T) {
	cpus := []int{0, 1, 2, 3}
	for _, c := range []struct {
		name   string
		offset int64   // ticks added on CPU 2
		rate   float64 // tick rate on CPU 2, ticks per ns
		want   bool
	}{
		{"in sync", 0, 3, true},
		{"offset 5 µs", 15_000, 3, false},
		{"offset -5 µs", -15_000, 3, false},
		{"other rate", 0, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			on := 0
			read := func() int64 {
				if on == 2 {
					return int64(float64(nanotime())*c.rate) + c.offset
				}
				return nanotime() * 3
			}
			pin := func(cpu int) error { on = cpu; return nil }
			// A loaded machine can widen every bracket past the slack;
			// the verdict of a fair counter may take a second try.
			got := counterInSync(read, cpus, pin)
			if got != c.want && c.want {
				got = counterInSync(read, cpus, pin)
			}
			if got != c.want {
				t.Fatalf("counterInSync = %v, want %v", got, c.want)
			}
		})
	}
}

// The real pinning: the monotonic clock itself agrees with itself on every
// CPU this process may use.
func TestCounterAgreesAcrossCPUsPins(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU pinning is Linux only")
	}
	agrees := false
	for try := 0; try < 2 && !agrees; try++ { // a second try: one descheduled read is not a broken check
		agrees = counterAgreesAcrossCPUs(nanotime)
	}
	if !agrees {
		t.Fatal("the monotonic clock disagrees with itself across CPUs: pinning or the check is broken")
	}
	t.Logf("cycle counter usable here: %v (clocksource %q)", counterUsable(), kernelClocksource())
}

// TestRingPairSlots checks the ring against a plain list of entries: with
// slots of two entries (actionFreePair) mixed in anywhere, entries()
// returns the last max entries, oldest first, as a ring of single entries
// would.
func TestRingPairSlots(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for maxEntries := 1; maxEntries <= 9; maxEntries++ {
		for trial := range 200 {
			var r ring
			r.reset(maxEntries)
			var want []rawEntry
			for i := range rng.IntN(4 * maxEntries) {
				e := rawEntry{tick: int64(i + 1), addr: uint64(trial), size: int64(i), action: snapshot.ActionAlloc}
				if rng.IntN(2) == 0 {
					e.action = actionFreePair
					want = append(want, e, e)
					want[len(want)-2].action = snapshot.ActionFreeRequested
					want[len(want)-1].action = snapshot.ActionFreeCompleted
				} else {
					want = append(want, e)
				}
				r.push(e)
			}
			want = want[max(0, len(want)-maxEntries):]
			n, all := r.entries()
			if got := slices.Collect(all); !slices.Equal(got, want) || n != len(want) {
				t.Fatalf("max %d trial %d: %d entries\n got %v\nwant %v", maxEntries, trial, n, got, want)
			}
		}
	}
}

// TestRecordFastPathMatchesSlowPath runs one workload on allocators with a
// deterministic tick source: one records through record's fast path (a
// tracker attached and detached midway), one has a tracker attached once
// its ring is full, so every entry from then on takes recordSlow, and one
// keeps everything in a ring too big to fill. The first two rings must
// hold the same entries, ticks included, all along, and the tracker must
// have seen every entry the big ring got while it was attached.
func TestRecordFastPathMatchesSlowPath(t *testing.T) {
	frames := [][]snapshot.Frame{nil, {{Filename: "a.py", Line: 1, Name: "f"}}}
	for _, level := range []RecordContext{RecordState, RecordAlloc, RecordAll} {
		var raw [3][]rawEntry
		var tracked []snapshot.TraceEntry
		from := 0
		for k := range raw {
			rt := acl.NewRuntime(acl.Config{})
			dev, _ := rt.Device(0)
			a, err := New(dev, config.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var tick int64
			a.counter, a.now = false, func() int64 { tick++; return tick }
			a.RecordHistory(true, level, []int{16, 16, 1 << 20}[k])
			s1, _ := dev.CreateStream()
			s2, _ := dev.CreateStream()
			rng := rand.New(rand.NewPCG(3, 4))
			var live []uint64
			var detach, detachAll func()
			for i := range 400 {
				if i == 50 { // the small rings are full: the fast path is on
					switch k {
					case 1:
						detachAll = a.AttachTracker(func(_ int, e snapshot.TraceEntry) { tracked = append(tracked, e) })
					case 2:
						from, _ = a.ring.entries()
					}
				}
				if k == 0 && i == 150 {
					detach = a.AttachTracker(func(int, snapshot.TraceEntry) {})
				}
				if detach != nil && i == 170 {
					detach()
					detach = nil
				}
				switch op := rng.IntN(10); {
				case op < 5 || len(live) == 0:
					p, err := a.MallocWithStack(int64(1+rng.IntN(3<<20)), s1, frames[rng.IntN(2)])
					if err != nil {
						t.Fatal(err)
					}
					live = append(live, p)
				case op < 9:
					j := rng.IntN(len(live))
					if rng.IntN(4) == 0 {
						_ = a.RecordStream(live[j], s2)
					}
					if err := a.FreeWithStack(live[j], frames[rng.IntN(2)]); err != nil {
						t.Fatal(err)
					}
					live = slices.Delete(live, j, j+1)
				default:
					_ = a.EmptyCache()
				}
				if i%8 == 0 && k < 2 {
					_, all := a.ring.entries()
					raw[k] = slices.AppendSeq(raw[k], all)
				}
			}
			if k == 0 && !a.fastRecord {
				t.Fatal("the ring is full and no tracker attached, but the fast path is off")
			}
			if k == 1 {
				detachAll()
			}
			if k == 2 {
				_, all := a.ring.entries()
				raw[k] = slices.Collect(all)
			}
		}
		if !slices.Equal(raw[0], raw[1]) {
			t.Fatalf("level %d: fast path\n%v\nslow path\n%v", level, raw[0], raw[1])
		}
		if len(tracked) != len(raw[2])-from {
			t.Fatalf("level %d: the tracker saw %d entries, the big ring holds %d after it was attached", level, len(tracked), len(raw[2])-from)
		}
		for i, e := range raw[2][from:] {
			if g := tracked[i]; g.Action != e.action || g.Size != e.size || g.Frames != e.frames {
				t.Fatalf("level %d: entry %d: tracker %+v, ring %+v", level, i, g, e)
			}
		}
		tracked = nil
	}
}
