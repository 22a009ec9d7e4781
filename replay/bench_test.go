package replay

import (
	"os"
	"testing"

	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// eachBenchFile runs fn per generated 1M-entry snapshot
// (benchcpu.EachSnapshot1M), reporting its CPU per op.
func eachBenchFile(b *testing.B, fn func(b *testing.B, path string)) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		c0 := benchcpu.Now()
		fn(b, path)
		b.ReportMetric(float64((benchcpu.Now()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkDecodeFixture decodes the newest real fixture (495 KB, 5163 entries).
func BenchmarkDecodeFixture(b *testing.B) {
	path := fixture.Path(b, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(fi.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeFile(path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode1M decodes a generated 1M-entry snapshot into the model.
func BenchmarkDecode1M(b *testing.B) {
	eachBenchFile(b, func(b *testing.B, path string) {
		for b.Loop() {
			if _, err := DecodeFile(path, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStats1M is `npumon stats` without the process: decode + stats.
func BenchmarkStats1M(b *testing.B) {
	eachBenchFile(b, func(b *testing.B, path string) {
		for b.Loop() {
			c, err := DecodeFile(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ComputeStats(c, StatsOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStatsFile1M is `npumon stats FILE` without the process: the
// streaming path (trace folded, not kept).
func BenchmarkStatsFile1M(b *testing.B) {
	eachBenchFile(b, func(b *testing.B, path string) {
		for b.Loop() {
			if _, err := StatsFile(path, StatsOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPythonPickleLoad1M is the baseline: CPython's C-accelerated
// pickle.load of the same file in a child process (interpreter start-up
// included, as for `npumon stats`).
func BenchmarkPythonPickleLoad1M(b *testing.B) {
	eachBenchFile(b, func(b *testing.B, path string) {
		b.ReportMetric(float64(benchcpu.PythonPickleLoad(b, path).Nanoseconds()), "child-cpu-ns/op")
	})
}

// BenchmarkStatsFileFold1M is BenchmarkStatsFile1M with the trace folded
// by the decoding goroutine (seq), by a second one (par), and with the
// trace itself decoded on two goroutines as well (pardecode,
// pardecode.go): what each gains on this machine.
func BenchmarkStatsFileFold1M(b *testing.B) {
	for _, m := range []struct {
		name string
		mode streamMode
	}{{"seq", streamSeq}, {"par", streamPar}, {"pardecode", streamParDecode}} {
		b.Run(m.name, func(b *testing.B) {
			eachBenchFile(b, func(b *testing.B, path string) {
				for b.Loop() {
					if _, err := StatsFile(path, StatsOptions{mode: m.mode}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
