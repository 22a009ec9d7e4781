// Package benchcpu gives benchmarks their CPU time beside wall time. The
// development machines are shared, so wall-clock ns/op mostly measures
// waiting for a core; the process's user+system CPU time (every goroutine
// and the GC included, children excluded) is the code's own cost, and
// ratios of it are steadier. Test-only.
package benchcpu

import (
	"syscall"
	"testing"
	"time"
)

// Now is this process's user+system CPU time.
func Now() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Report adds cpu-ns/op since start and, when items > 0, items per CPU
// second under unit.
func Report(b *testing.B, start time.Duration, items float64, unit string) {
	cpu := Now() - start
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	if items > 0 {
		b.ReportMetric(items/cpu.Seconds(), unit)
	}
}
