package explain

import (
	"context"
	"os"
	"testing"

	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif/sim"
)

// make bench-data writes both files (Python's pickle).
const (
	bench1M    = "../../testdata/bench/snapshot_1m.pickle"
	bench1MOOM = "../../testdata/bench/snapshot_1m_oom.pickle"
)

func benchFile(b *testing.B, path string) {
	b.Helper()
	if _, err := os.Stat(path); err != nil {
		b.Skip("run make bench-data first")
	}
	c0 := benchcpu.Now()
	b.Cleanup(func() {
		if b.N > 0 {
			b.ReportMetric(float64((benchcpu.Now()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	})
}

// BenchmarkStatsFile1MOOM is the baseline of BenchmarkExplain1MOOM: `npumon
// stats` on the same file (streamed decode and fold).
func BenchmarkStatsFile1MOOM(b *testing.B) {
	benchFile(b, bench1MOOM)
	for b.Loop() {
		if _, err := replay.StatsFile(bench1MOOM, replay.StatsOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExplain1MOOM is `npumon explain` on the 1,000,000-entry file with
// one oom entry: decode, the walk, the undo walk at the oom, and the
// what-if (baseline and the two default alternatives) overlapping them.
func BenchmarkExplain1MOOM(b *testing.B) {
	benchFile(b, bench1MOOM)
	for b.Loop() {
		c, err := replay.DecodeFile(bench1MOOM, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		e, err := Explain(context.Background(), c, Options{Simulate: sim.Simulate})
		if err != nil || len(e.Devices[0].OOMs) != 1 || len(e.Devices[0].OOMs[0].WhatIf) != 3 {
			b.Fatalf("%v %+v", err, e)
		}
	}
}

// BenchmarkExplain1MOOMNoWhatIf is explain --no-whatif.
func BenchmarkExplain1MOOMNoWhatIf(b *testing.B) {
	benchFile(b, bench1MOOM)
	for b.Loop() {
		c, err := replay.DecodeFile(bench1MOOM, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Explain(context.Background(), c, Options{NoWhatIf: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatsFile1M is the baseline of BenchmarkDetectSteps1M: `npumon
// stats` on the same file.
func BenchmarkStatsFile1M(b *testing.B) {
	benchFile(b, bench1M)
	for b.Loop() {
		if _, err := replay.StatsFile(bench1M, replay.StatsOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// device1M decodes the 1,000,000-entry file and makes its device 0, for
// the benchmarks of one of explain's parts; it skips without the file.
func device1M(b *testing.B) (*replay.Capture, *Device) {
	b.Helper()
	if _, err := os.Stat(bench1M); err != nil {
		b.Skip("run make bench-data first")
	}
	c, err := replay.DecodeFile(bench1M, replay.Options{})
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDevice(c, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	return c, d
}

// BenchmarkDetectSteps1M is step detection on the decoded 1,000,000-entry
// file: every source tried, the repeat period the one that holds.
func BenchmarkDetectSteps1M(b *testing.B) {
	c, d := device1M(b)
	benchFile(b, bench1M) // CPU time from here: the detection only
	b.ResetTimer()
	var s *Steps
	for b.Loop() {
		s = DetectSteps(d.Timeline, c.Snapshot.Stack, d.Ops)
	}
	b.ReportMetric(float64(s.Len()), "steps")
}

// BenchmarkExplain1M is `npumon explain` on the 1,000,000-entry file
// without an oom entry (the what-if is not run there unless asked for).
func BenchmarkExplain1M(b *testing.B) {
	benchFile(b, bench1M)
	for b.Loop() {
		c, err := replay.DecodeFile(bench1M, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Explain(context.Background(), c, Options{Simulate: sim.Simulate}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExplain1MWhatIf is `npumon explain --whatif` on the same file:
// BenchmarkExplain1M with the baseline and the two default alternatives
// simulated over the whole trace.
func BenchmarkExplain1MWhatIf(b *testing.B) {
	benchFile(b, bench1M)
	for b.Loop() {
		c, err := replay.DecodeFile(bench1M, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		e, err := Explain(context.Background(), c, Options{Simulate: sim.Simulate, WhatIf: true})
		if err != nil || len(e.Devices[0].OOMs[0].WhatIf) != 3 {
			b.Fatalf("%v %+v", err, e)
		}
	}
}

// BenchmarkCategorize1M is the memory categories of the decoded
// 1,000,000-entry file (replay/category's Classify), as explain computes
// them.
func BenchmarkCategorize1M(b *testing.B) {
	c, d := device1M(b)
	benchFile(b, bench1M) // CPU time from here: the categories only
	b.ResetTimer()
	for b.Loop() {
		Categorize(d.Timeline, c.Snapshot.Stack)
	}
}

// BenchmarkFiguresAtPeak1M is explain's figures at the active peak of the
// decoded 1,000,000-entry file: the undo walk from the end back to the
// peak (Timeline.StatesAfter) and the tiling there.
func BenchmarkFiguresAtPeak1M(b *testing.B) {
	_, d := device1M(b)
	peak := scanTrace(d.Timeline).peak
	benchFile(b, bench1M) // CPU time from here: the figures only
	b.ResetTimer()
	for b.Loop() {
		FiguresAfterAll(d.Timeline, []int{peak})
	}
}

// BenchmarkWalker1M is explain's Walker over the whole decoded
// 1,000,000-entry file (its live allocations by address, one lookup per
// entry), and the live set at the end.
func BenchmarkWalker1M(b *testing.B) {
	_, d := device1M(b)
	benchFile(b, bench1M) // CPU time from here: the walk only
	b.ResetTimer()
	for b.Loop() {
		LiveAfter(d.Timeline, len(d.Timeline.Entries)-1)
	}
}
