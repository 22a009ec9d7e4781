package replay

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/npumon/npumon/testdata/benchcpu"
	"github.com/npumon/npumon/testdata/fixture"
)

// benchFiles are the generated 1,000,000-entry snapshots (make bench-data):
// "distinct" is shaped like real dumps (a frames list object per
// allocation), "shared" refers to 400 shared stack lists.
var benchFiles = []struct{ name, path string }{
	{"distinct", "../testdata/bench/snapshot_1m_distinct.pickle"},
	{"shared", "../testdata/bench/snapshot_1m.pickle"},
}

// eachBenchFile runs fn as a sub-benchmark per generated file, reporting
// the file's size per op and allocations; a missing file skips its case.
func eachBenchFile(b *testing.B, fn func(b *testing.B, path string)) {
	for _, f := range benchFiles {
		b.Run(f.name, func(b *testing.B) {
			fi, err := os.Stat(f.path)
			if err != nil {
				b.Skip("run make bench-data first")
			}
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			c0 := benchcpu.Now()
			fn(b, f.path)
			b.ReportMetric(float64((benchcpu.Now()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
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
	py := fixture.Tool(b, "python3", "python3")
	eachBenchFile(b, func(b *testing.B, path string) {
		var cpu time.Duration
		for b.Loop() {
			cmd := exec.Command(py, "-c", "import pickle,sys\nwith open(sys.argv[1],'rb') as f: pickle.load(f)", path)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "child-cpu-ns/op")
	})
}
