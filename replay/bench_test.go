package replay

import (
	"os"
	"os/exec"
	"testing"

	"github.com/npumon/npumon/testdata/fixture"
)

// benchFile is the generated 1,000,000-entry snapshot (make bench-data).
const benchFile = "../testdata/bench/snapshot_1m.pickle"

// benchFileSize reports path's size per op and allocations, or skips b
// when path is missing.
func benchFileSize(b *testing.B, path string) {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		if path == benchFile {
			b.Skip("run make bench-data first")
		}
		b.Skip(err)
	}
	b.SetBytes(fi.Size())
	b.ReportAllocs()
}

// BenchmarkDecodeFixture decodes the newest real fixture (495 KB, 5163 entries).
func BenchmarkDecodeFixture(b *testing.B) {
	path := fixture.Path(b, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	benchFileSize(b, path)
	for b.Loop() {
		if _, err := DecodeFile(path, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode1M decodes the generated 1M-entry snapshot into the model.
func BenchmarkDecode1M(b *testing.B) {
	benchFileSize(b, benchFile)
	for b.Loop() {
		if _, err := DecodeFile(benchFile, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStats1M is `npumon stats` without the process: decode + stats.
func BenchmarkStats1M(b *testing.B) {
	benchFileSize(b, benchFile)
	for b.Loop() {
		c, err := DecodeFile(benchFile, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ComputeStats(c, StatsOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatsFile1M is `npumon stats FILE` without the process: the
// streaming path (trace folded, not kept).
func BenchmarkStatsFile1M(b *testing.B) {
	benchFileSize(b, benchFile)
	for b.Loop() {
		if _, err := StatsFile(benchFile, StatsOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPythonPickleLoad1M is the baseline: CPython's C-accelerated
// pickle.load of the same file in a child process (interpreter start-up
// included, as for `npumon stats`). Skipped without python3.
func BenchmarkPythonPickleLoad1M(b *testing.B) {
	if _, err := os.Stat(benchFile); err != nil {
		b.Skip("run make bench-data first")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		b.Skip("no python3")
	}
	for b.Loop() {
		cmd := exec.Command(py, "-c", "import pickle,sys\nwith open(sys.argv[1],'rb') as f: pickle.load(f)", benchFile)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}
