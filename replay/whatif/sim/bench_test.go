package sim

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
)

// synthetic returns a snapshot whose device-0 trace has about n entries of
// a training-like pattern: steps of 200 allocations (512 B … 64 MiB,
// log-uniform) on the compute stream, freed in random order, one in twenty
// of them a cross-stream deferred free that completes a few entries later.
func synthetic(n int) *snapshot.Snapshot {
	const stream = 0x7f00_0000_1000
	rng := rand.New(rand.NewPCG(1, 2))
	tr := make([]snapshot.TraceEntry, 0, n+8)
	var addr uint64 = 0x7f10_0000_0000
	type live struct {
		addr uint64
		size int64
	}
	var pending []snapshot.TraceEntry // deferred free_completed entries
	for len(tr) < n {
		var step []live
		for range 200 {
			size := int64(512) << rng.IntN(18)
			size += rng.Int64N(size)
			addr += 0x1000_0000
			step = append(step, live{addr, size})
			tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: addr, Size: size, Stream: stream})
			if len(pending) > 0 && rng.IntN(4) == 0 {
				tr = append(tr, pending[0])
				pending = pending[1:]
			}
		}
		rng.Shuffle(len(step), func(i, j int) { step[i], step[j] = step[j], step[i] })
		for _, l := range step {
			e := snapshot.TraceEntry{Action: snapshot.ActionFreeRequested, Addr: l.addr, Size: l.size, Stream: stream}
			tr = append(tr, e)
			e.Action = snapshot.ActionFreeCompleted
			if rng.IntN(20) == 0 {
				pending = append(pending, e)
			} else {
				tr = append(tr, e)
			}
		}
	}
	tr = append(tr, pending...)
	return &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}}
}

var (
	benchSnap *snapshot.Snapshot
	benchTL   *replay.Timeline
)

func benchInput(b *testing.B) *input {
	if benchTL == nil {
		benchSnap = synthetic(1_000_000)
		tl, err := replay.NewTimelineWithoutInitial(benchSnap, 0)
		if err != nil {
			b.Fatal(err)
		}
		benchTL = tl
	}
	b.ReportAllocs()
	return buildInput(benchTL, nil)
}

// BenchmarkBaselineAllocatorOnly drives the same operations straight into
// allocator.Malloc/Free: no clock, stats, curve or deferred frees. It is
// the floor the what-if machinery adds to.
func BenchmarkBaselineAllocatorOnly(b *testing.B) {
	in := benchInput(b)
	defer reportCPU(b, benchcpu.Now())
	for b.Loop() {
		rt := acl.NewRuntime(acl.Config{Devices: []acl.DeviceSpec{{HBMBytes: 64 * config.GiB, SystemReserved: -1}}})
		dev, _ := rt.Device(0)
		s, _ := dev.CreateStream()
		a, _ := allocator.New(dev, config.DefaultConfig(config.FlavourNPU))
		ptrs := make([]uint64, in.ids)
		for i := range in.ops {
			o := &in.ops[i]
			switch o.kind {
			case opAlloc:
				ptrs[o.id], _ = a.Malloc(o.size, s)
			case opFree:
				_ = a.Free(ptrs[o.id])
			}
		}
	}
}

// reportCPU adds the process's CPU time per op since c0 (benchcpu): on a
// shared machine it is steadier than ns/op.
func reportCPU(b *testing.B, c0 time.Duration) {
	b.ReportMetric(float64((benchcpu.Now()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func BenchmarkBuildInput1M(b *testing.B) {
	benchInput(b)
	defer reportCPU(b, benchcpu.Now())
	for b.Loop() {
		buildInput(benchTL, nil)
	}
}

func benchSimulate(b *testing.B, conf string) {
	in := benchInput(b)
	cfg, err := config.ParseConfig(conf)
	if err != nil {
		b.Fatal(err)
	}
	defer reportCPU(b, benchcpu.Now())
	for b.Loop() {
		r, err := simulate(context.Background(), in, conf, cfg, 64*config.GiB, true)
		if err != nil || r.OOMs != 0 {
			b.Fatal(err, r.OOMs)
		}
	}
	b.ReportMetric(float64(len(in.entries)), "entries")
}

func BenchmarkSimulate1M(b *testing.B)           { benchSimulate(b, "") }
func BenchmarkSimulate1MExpandable(b *testing.B) { benchSimulate(b, "expandable_segments:True") }
func BenchmarkSimulate1MMaxSplit(b *testing.B)   { benchSimulate(b, "max_split_size_mb:128") }
func BenchmarkSimulate1MRoundupDivisions(b *testing.B) {
	benchSimulate(b, "roundup_power2_divisions:4")
}

// BenchmarkSimulateParallel runs the baseline and three alternatives
// through Simulate, which runs them in parallel.
func BenchmarkSimulateParallel(b *testing.B) {
	benchInput(b)
	opts := whatif.Options{
		Confs:     []string{"expandable_segments:True", "max_split_size_mb:128", "roundup_power2_divisions:4"},
		DeviceMem: 64 * config.GiB,
	}
	npu := config.FlavourNPU
	defer reportCPU(b, benchcpu.Now())
	for b.Loop() {
		if _, err := SimulateSnapshot(context.Background(), benchSnap, npu, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimulateFile1M is explain's what-if on make bench-data's
// 1,000,000-entry snapshot_1m.pickle (decoded once, outside the timing): the
// baseline and the two default alternatives, each over the whole trace, run
// one after another (Parallel 1), so that cpu-ns/op is their sum.
func BenchmarkSimulateFile1M(b *testing.B) {
	const path = "../../../testdata/bench/snapshot_1m.pickle"
	if _, err := os.Stat(path); err != nil {
		b.Skip("run make bench-data first")
	}
	c, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		b.Fatal(err)
	}
	devices := c.Snapshot.Devices()
	opts := whatif.Options{Confs: whatif.Alternatives(c.Snapshot, devices), Devices: devices, Parallel: 1}
	c0 := benchcpu.Now()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Simulate(context.Background(), c, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((benchcpu.Now()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
