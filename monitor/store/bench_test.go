package store

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/replay"
)

// benchCapture is a consistent capture of n entries over 256 segments
// (64 large with 2 MiB slots, 192 small with 128 KiB slots) holding about
// 2,000 live blocks: allocs and free_requested/free_completed pairs with
// shared stacks and increasing epoch times.
func benchCapture(n int) *snapshot.Snapshot {
	r := rand.New(rand.NewPCG(42, 42))
	type seg struct {
		addr       uint64
		size, slot int64
		live       map[uint64]int64 // addr → requested
	}
	var segs []*seg
	for i := 0; i < 256; i++ {
		s := &seg{addr: 0x7e0000000000 + uint64(i)<<26, size: 2 << 20, slot: 128 << 10, live: map[uint64]int64{}}
		if i < 64 {
			s.size, s.slot = 20<<20, 2<<20
		}
		segs = append(segs, s)
	}
	tr := make([]snapshot.TraceEntry, 0, n)
	t := int64(1_760_000_000_000_000)
	for len(tr) < n {
		s := segs[r.IntN(len(segs))]
		a := s.addr + uint64(r.Int64N(s.size/s.slot)*s.slot)
		t += 1 + r.Int64N(20)
		fr := snapshot.StackID(1 + r.IntN(50))
		if req, ok := s.live[a]; ok {
			tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionFreeRequested, Addr: a, Size: req, Stream: 1, TimeUS: t, Frames: fr},
				snapshot.TraceEntry{Action: snapshot.ActionFreeCompleted, Addr: a, Size: req, Stream: 1, TimeUS: t + 1, Frames: fr})
			delete(s.live, a)
		} else if len(s.live)*2 < int(s.size/s.slot) || r.IntN(2) == 0 {
			req := s.slot - r.Int64N(s.slot/2)
			tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: a, Size: req, Stream: 1, TimeUS: t, Frames: fr})
			s.live[a] = req
		}
	}
	tr = tr[:n]
	stacks := []snapshot.Stack{nil}
	for i := 1; i <= 50; i++ {
		stacks = append(stacks, snapshot.Stack{{Filename: "model.py", Line: int64(i), Name: "forward"}, {Filename: "train.py", Line: 7, Name: "step"}})
	}
	snap := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}, Stacks: stacks}
	// the final state: replay the (possibly cut) trace over empty segments
	final := map[uint64]map[uint64][2]int64{} // seg → addr → {size, requested}; state via pending
	pending := map[uint64]bool{}
	for _, s := range segs {
		final[s.addr] = map[uint64][2]int64{}
	}
	segOf := func(a uint64) *seg { return segs[(a-0x7e0000000000)>>26] }
	for _, e := range tr {
		s := segOf(e.Addr)
		switch e.Action {
		case snapshot.ActionAlloc:
			final[s.addr][e.Addr] = [2]int64{s.slot, e.Size}
		case snapshot.ActionFreeRequested:
			pending[e.Addr] = true
		case snapshot.ActionFreeCompleted:
			delete(final[s.addr], e.Addr)
			delete(pending, e.Addr)
		}
	}
	for _, s := range segs {
		out := snapshot.Segment{Address: s.addr, TotalSize: s.size, Stream: 1, IsLarge: s.size > 2<<20}
		var addrs []uint64
		for a := range final[s.addr] {
			addrs = append(addrs, a)
		}
		slices.Sort(addrs)
		cur := s.addr
		for _, a := range addrs {
			b := final[s.addr][a]
			if a > cur {
				out.Blocks = append(out.Blocks, snapshot.Block{Address: cur, Size: int64(a - cur)})
			}
			st := snapshot.StateActiveAllocated
			if pending[a] {
				st = snapshot.StateActivePendingFree
			}
			out.Blocks = append(out.Blocks, snapshot.Block{Address: a, Size: b[0], RequestedSize: b[1], State: st})
			cur = a + uint64(b[0])
		}
		if end := s.addr + uint64(s.size); cur < end {
			out.Blocks = append(out.Blocks, snapshot.Block{Address: cur, Size: int64(end - cur)})
		}
		snap.Segments = append(snap.Segments, out)
	}
	return snap
}

const benchEntries = 1_000_000

var benchOnce struct {
	sync.Once
	snap *snapshot.Snapshot
	st   *Store
}

func benchStore(b *testing.B) (*snapshot.Snapshot, *Store) {
	benchOnce.Do(func() {
		benchOnce.snap = benchCapture(benchEntries)
		benchOnce.st = New(Options{})
		if err := benchOnce.st.IngestSnapshot(benchOnce.snap); err != nil {
			b.Fatal(err)
		}
	})
	return benchOnce.snap, benchOnce.st
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStoreIngest: IngestSnapshot of a 1,000,000-entry capture,
// including replay.NewTimeline's reconstruction of the initial state.
// Reports entries/s and the Store's bytes per entry (log, series, indexes)
// with the checkpoints reported separately.
func BenchmarkStoreIngest(b *testing.B) {
	snap, _ := benchStore(b)
	b.ResetTimer()
	c0 := benchcpu.Now()
	var st *Store
	for i := 0; i < b.N; i++ {
		st = New(Options{})
		if err := st.IngestSnapshot(snap); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	benchcpu.Report(b, c0, float64(benchEntries)*float64(b.N), "entries/cpu-s")
	b.ReportMetric(float64(benchEntries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	st = nil
	base := heapInUse()
	st = New(Options{})
	st.IngestSnapshot(snap)
	total := heapInUse() - base
	d := st.devs[0]
	var cp uint64
	for _, c := range d.cps {
		cp += uint64(cap(c.Segs))*uint64(unsafe.Sizeof(snapshot.Segment{})) + uint64(cap(c.Blocks))*32
	}
	b.ReportMetric(float64(total-cp)/benchEntries, "B/entry")
	b.ReportMetric(float64(cp)/(1<<20), "checkpoint-MiB")
	b.ReportMetric(float64(len(d.cps)), "checkpoints")
	runtime.KeepAlive(st)
}

// BenchmarkTimelineBaseline: replay.NewTimeline alone on the same capture
// (the undo pass every ingest starts with) — the baseline for the ratio.
func BenchmarkTimelineBaseline(b *testing.B) {
	snap, _ := benchStore(b)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		if _, err := replay.NewTimeline(snap, 0); err != nil {
			b.Fatal(err)
		}
	}
	benchcpu.Report(b, c0, float64(benchEntries)*float64(b.N), "entries/cpu-s")
	b.ReportMetric(float64(benchEntries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkStoreStateAt: StateAt at random cursors; reports the median.
func BenchmarkStoreStateAt(b *testing.B) {
	_, st := benchStore(b)
	first, last := st.Bounds(0)
	r := rand.New(rand.NewPCG(1, 2))
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		c := first + r.Int64N(last-first+1)
		t0 := time.Now()
		s := st.StateAt(0, c)
		durs = append(durs, time.Since(t0))
		if len(s.Segments) != 256 {
			b.Fatal("wrong state")
		}
	}
	b.StopTimer()
	benchcpu.Report(b, c0, 0, "")
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "median-ns")
}

// BenchmarkStoreSeries200: Series with 200 columns over the whole log.
func BenchmarkStoreSeries200(b *testing.B) {
	_, st := benchStore(b)
	first, last := st.Bounds(0)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		s := st.Series(0, first, last+1, 200)
		if len(s.Active) != 200 {
			b.Fatal("columns")
		}
	}
	benchcpu.Report(b, c0, 0, "")
}

// BenchmarkStoreSummary: Summary at random cursors (a StateAt plus peaks).
func BenchmarkStoreSummary(b *testing.B) {
	_, st := benchStore(b)
	first, last := st.Bounds(0)
	r := rand.New(rand.NewPCG(3, 4))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.Summary(0, first+r.Int64N(last-first+1))
	}
}

// BenchmarkStoreAppend: live appends in batches of 256 entries.
func BenchmarkStoreAppend(b *testing.B) { benchAppend(b, Options{}) }

// benchAppend appends the generated trace to a live Store of opts in
// batches of 256 entries, round and round.
func benchAppend(b *testing.B, opts Options) {
	snap, _ := benchStore(b)
	tr := snap.DeviceTraces[0]
	st := New(opts)
	tl, _ := replay.NewTimeline(snap, 0)
	st.StartLive(&snapshot.Snapshot{Segments: tl.Initial}, nil)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i += 256 {
		j := i % (len(tr) - 256)
		st.Append(0, tr[j:j+min(256, b.N-i)])
	}
	benchcpu.Report(b, c0, float64(b.N), "entries/cpu-s")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkStoreEventsAround: a page of 100 events at a random cursor.
func BenchmarkStoreEventsAround(b *testing.B) {
	_, st := benchStore(b)
	first, last := st.Bounds(0)
	r := rand.New(rand.NewPCG(5, 6))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.EventsAround(0, first+r.Int64N(last-first+1), 50, 50)
	}
}

// BenchmarkTimelineStateAfter: replay's O(n) StateAfter at random indexes,
// the baseline StateAt's checkpoints are measured against.
func BenchmarkTimelineStateAfter(b *testing.B) {
	snap, _ := benchStore(b)
	tl, err := replay.NewTimeline(snap, 0)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		tl.StateAfter(r.IntN(len(tl.Entries)))
	}
	benchcpu.Report(b, c0, 0, "")
}

// BenchmarkSeriesNaive: the same 200 columns by scanning every value, the
// baseline for the min/max pyramid.
func BenchmarkSeriesNaive(b *testing.B) {
	_, st := benchStore(b)
	d := st.devs[0]
	b.ResetTimer()
	c0 := benchcpu.Now()
	defer func() { benchcpu.Report(b, c0, 0, "") }()
	for i := 0; i < b.N; i++ {
		v := &d.active.v
		out := make([]MinMax, 200)
		for c := range out {
			lo, hi := c*v.Len()/200, (c+1)*v.Len()/200
			m := MinMax{v.at(lo), v.at(lo)}
			v.each(lo, hi, func(p []int64) {
				for _, x := range p {
					m.Min, m.Max = min(m.Min, x), max(m.Max, x)
				}
			})
			out[c] = m
		}
	}
}

// BenchmarkStoreStateAtStep: StateAt while stepping the cursor one event at
// a time (the TUI's arrow keys), which rolls on from the previous answer.
func BenchmarkStoreStateAtStep(b *testing.B) {
	_, st := benchStore(b)
	evs := st.Events(0, -1<<62, 1<<62, 0)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		st.StateAt(0, evs[(500_000+i)%len(evs)].Time)
	}
	benchcpu.Report(b, c0, 0, "")
}

// BenchmarkStoreCursorStep: what a TUI cursor move asks the Store for —
// StateAt and Summary at the next event (the state is built once).
func BenchmarkStoreCursorStep(b *testing.B) {
	_, st := benchStore(b)
	evs := st.Events(0, -1<<62, 1<<62, 0)
	b.ResetTimer()
	c0 := benchcpu.Now()
	for i := 0; i < b.N; i++ {
		c := evs[(500_000+i)%len(evs)].Time
		st.StateAt(0, c)
		st.Summary(0, c)
	}
	benchcpu.Report(b, c0, 0, "")
}

// BenchmarkStoreAppendRetained is BenchmarkStoreAppend with a retention window of
// 65,536 entries: every 4,096 entries a chunk is thinned.
func BenchmarkStoreAppendRetained(b *testing.B) {
	benchAppend(b, Options{Retain: Retention{Entries: 1 << 16}})
}

// BenchmarkStoreStreamOwned: the 1,000,000-entry capture streamed into a
// Store (OwnedStream, batches of 4,096 as the decoder hands them) and
// settled, its segment map settled from the provisional roll
// (settleFromProvisional) or rolled again (the way before); settle-ns is
// Finish alone. started: its second half alone, so the start holds the
// blocks live at the middle (thousands, most never touched again).
func BenchmarkStoreStreamOwned(b *testing.B) {
	snap, _ := benchStore(b)
	tables := &replay.TraceTables{Stacks: snap.Stacks, Actions: snap.Actions, Texts: snap.Texts}
	for _, c := range []struct {
		way     string
		started bool
	}{{"provisional", false}, {"roll", false}, {"provisional/started", true}, {"roll/started", true}} {
		way := strings.TrimSuffix(c.way, "/started")
		tr := snap.DeviceTraces[0]
		if c.started {
			tr = tr[len(tr)/2:]
		}
		b.Run(c.way, func(b *testing.B) {
			settleRollAgain = way == "roll"
			defer func() { settleRollAgain = false }()
			var settle time.Duration
			c0 := benchcpu.Now()
			for b.Loop() {
				st := New(Options{})
				o := st.StreamOwned()
				for i := 0; i < len(tr); i += 4096 {
					o.TraceBatch(0, tr[i:min(len(tr), i+4096)], tables)
				}
				owned := *snap
				owned.DeviceTraces = [][]snapshot.TraceEntry{nil}
				t0 := time.Now()
				if err := o.Finish(&owned, []int{0}); err != nil {
					b.Fatal(err)
				}
				settle += time.Since(t0)
			}
			benchcpu.Report(b, c0, float64(len(tr))*float64(b.N), "entries/cpu-s")
			b.ReportMetric(float64(settle.Nanoseconds())/float64(b.N), "settle-ns")
		})
	}
}
