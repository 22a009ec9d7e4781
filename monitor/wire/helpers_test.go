package wire

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// filepathTemp makes a short temporary directory (Unix socket paths are
// limited to ~108 bytes, t.TempDir can exceed that).
func filepathTemp() (string, error) { return os.MkdirTemp("", "npm") }

func removeAll(dir string) { os.RemoveAll(dir) }

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// cpuNow is this process's user+system CPU time (benchmarks report CPU per
// op: the development machine is shared, so wall-clock ns/op swings).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op (and, when items > 0, cpu-based per-second rates).
func reportCPU(b *testing.B, start time.Duration, items float64, unit string) {
	cpu := cpuNow() - start
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if items > 0 {
		b.ReportMetric(items/cpu.Seconds(), unit)
	}
}
