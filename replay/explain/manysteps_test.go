package explain

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// manyStepsCapture is a program doing the same thing over and over while
// it keeps live blocks allocated (an inference server), as
// replay/testdata/gen_manysteps.py writes it: live blocks of distinct sizes
// allocated once, then iters iterations (no times: the repeat period finds
// them, each a step) of temps blocks allocated and freed, with cache one
// of 64 cached blocks replaced and with leak one 512-byte block kept.
func manyStepsCapture(iters, live, temps int, cache, leak bool) *replay.Capture {
	const base = 0x7f4000000000
	s := &snapshot.Snapshot{Stacks: []snapshot.Stack{nil}}
	stack := func(file string, line int64, name string) snapshot.StackID {
		s.Stacks = append(s.Stacks, snapshot.Stack{{Filename: file, Line: line, Name: name}, {Filename: "/srv/serve.py", Line: 10, Name: "main"}})
		return snapshot.StackID(len(s.Stacks) - 1)
	}
	setup := stack("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", 1326, "convert")
	var temp []snapshot.StackID
	for k := range 16 {
		temp = append(temp, stack("/srv/model.py", int64(100+k), "layer"))
	}
	cacheSt, leakSt := stack("/srv/cache.py", 40, "put"), stack("/srv/serve.py", 44, "log_request")
	var tr []snapshot.TraceEntry
	held := map[uint64]snapshot.Block{}
	next := uint64(base)
	bump := func(size int64) uint64 {
		a := next
		next += uint64((size + 511) / 512 * 512)
		return a
	}
	alloc := func(a uint64, size int64, st snapshot.StackID) {
		tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: a, Size: size, Frames: st})
		held[a] = snapshot.Block{Address: a, Size: size, RequestedSize: size, State: snapshot.StateActiveAllocated, Frames: st}
	}
	free := func(a uint64) {
		b := held[a]
		delete(held, a)
		for _, act := range []snapshot.Action{snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted} {
			tr = append(tr, snapshot.TraceEntry{Action: act, Addr: a, Size: b.Size, Frames: b.Frames})
		}
	}
	tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionSegmentAlloc, Addr: base, Size: 1 << 40, Frames: setup})
	for i := range live {
		size := int64(512 * (i + 1))
		alloc(bump(size), size, setup)
	}
	tempAddr := make([]uint64, temps)
	for k := range tempAddr {
		tempAddr[k] = bump(1 << 20)
	}
	cacheAddr := make([]uint64, 64)
	for k := range cacheAddr {
		cacheAddr[k] = bump(1 << 16)
	}
	var cached []uint64
	for n := range iters {
		for k := range temps {
			alloc(tempAddr[k], int64(4096*(k+1)), temp[k%len(temp)])
		}
		for k := range temps {
			free(tempAddr[k])
		}
		if cache {
			if len(cached) == 64 {
				free(cached[0])
				cached = cached[1:]
			}
			alloc(cacheAddr[n%64], 1<<16, cacheSt)
			cached = append(cached, cacheAddr[n%64])
		}
		if leak {
			alloc(bump(512), 512, leakSt)
		}
	}
	// one segment: the live blocks, inactive ones between them
	seg := snapshot.Segment{Address: base, TotalSize: 1 << 40, IsLarge: true, Frames: setup}
	addrs := make([]uint64, 0, len(held))
	for a := range held {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, cmp.Compare)
	cur := uint64(base)
	for _, a := range addrs {
		if a > cur {
			seg.Blocks = append(seg.Blocks, snapshot.Block{Address: cur, Size: int64(a - cur), State: snapshot.StateInactive})
		}
		seg.Blocks = append(seg.Blocks, held[a])
		seg.AllocatedSize += held[a].Size
		cur = a + uint64(held[a].Size)
	}
	if end := uint64(base + 1<<40); cur < end {
		seg.Blocks = append(seg.Blocks, snapshot.Block{Address: cur, Size: int64(end - cur), State: snapshot.StateInactive})
	}
	seg.ActiveSize, seg.RequestedSize = seg.AllocatedSize, seg.AllocatedSize
	s.Segments = []snapshot.Segment{seg}
	s.DeviceTraces = [][]snapshot.TraceEntry{tr}
	return &replay.Capture{Snapshot: s}
}

// benchManySteps explains c (no what-if) b.N times and reports its steps.
func benchManySteps(b *testing.B, c *replay.Capture) {
	var e *Explanation
	for b.Loop() {
		var err error
		if e, err = Explain(context.Background(), c, Options{NoWhatIf: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(e.Devices[0].Steps), "steps")
	b.ReportMetric(float64(len(c.Snapshot.DeviceTraces[0])), "entries")
}

// BenchmarkExplainManySteps is explain on a trace with a step every 16
// entries: 20,000 steps (the repeat period), 5,000 blocks live from the
// start and a leak of one block per step (a suspect spanning every step).
func BenchmarkExplainManySteps(b *testing.B) {
	benchManySteps(b, manyStepsCapture(20000, 5000, 4, true, true))
}

// BenchmarkExplainPeriodOne is explain on a 204,999-entry trace of one
// allocation made and freed over and over (66,666 steps of three entries),
// 5,000 blocks live from the start.
func BenchmarkExplainPeriodOne(b *testing.B) {
	benchManySteps(b, manyStepsCapture(66666, 5000, 1, false, false))
}

// TestManyStepsCapture: the benchmarks' traces find their steps.
func TestManyStepsCapture(t *testing.T) {
	for _, tc := range []struct {
		c     *replay.Capture
		steps int
		leaks int
	}{
		{manyStepsCapture(200, 50, 4, true, true), 200, 1},
		{manyStepsCapture(300, 50, 1, false, false), 300, 0},
	} {
		e, err := Explain(context.Background(), tc.c, Options{NoWhatIf: true})
		if err != nil {
			t.Fatal(err)
		}
		d := e.Devices[0]
		if d.Steps != tc.steps || len(d.LeakSuspects) != tc.leaks || d.StepSource != StepsPeriod {
			t.Fatalf("%d steps from %q, %d leak suspects; want %d, %d", d.Steps, d.StepSource, len(d.LeakSuspects), tc.steps, tc.leaks)
		}
	}
}
