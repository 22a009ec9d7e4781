//go:build unix

package align_test

import (
	"syscall"
	"testing"
)

// reportCPU starts counting the process's CPU time (user and system, all
// threads: the garbage collector's too); the function it returns reports
// it per op as cpu-ns/op, the figure a loaded machine distorts least.
func reportCPU(b *testing.B) func() {
	t0 := cpuNS()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuNS()-t0)/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuNS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
