package allocator

import (
	"testing"
	"time"
)

var sinkTick int64

func BenchmarkTickMonotonic(b *testing.B) {
	for b.Loop() {
		sinkTick += nanotime()
	}
}

func BenchmarkTickTSC(b *testing.B) {
	for b.Loop() {
		sinkTick += rdtsc()
	}
}

func BenchmarkTickTimeSince(b *testing.B) {
	base := time.Now()
	for b.Loop() {
		sinkTick += int64(time.Since(base))
	}
}

func BenchmarkTickTimeNow(b *testing.B) {
	for b.Loop() {
		sinkTick += time.Now().UnixNano()
	}
}
