package allocator

import (
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	_ "unsafe" // go:linkname
)

// nanotime is the runtime's monotonic clock (what time.Now's monotonic
// reading uses), without building a time.Time.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// counterUsable is whether the CPU's cycle counter (the TSC on amd64,
// CNTVCT_EL0 on arm64) is fit for trace timestamps on this machine; decided
// once per process, when the first allocator needs a clock. On amd64 the
// counter measured about twice as fast as the runtime's monotonic clock
// with clocksource tsc, and 2.5× with kvm-clock (BENCHMARKS.md).
var counterUsable = sync.OnceValue(counterReliable)

// tickSource is the hot-path timestamp of allocators without an injected
// clock: counter ticks, or monotonic nanoseconds where the counter is not
// usable. Either way ticks only mean something through a converter.
func tickSource() func() int64 {
	if counterUsable() {
		return cycleCounter
	}
	return nanotime
}

// kernelClocksource is the clocksource Linux keeps time with ("" elsewhere):
// a counter the kernel trusts has passed its synchronisation checks.
func kernelClocksource() string {
	if runtime.GOOS != "linux" {
		return ""
	}
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// clockPair is one (wall ns since epoch, tick) sample.
type clockPair struct{ wall, tick int64 }

// replicates is ApproximateClock's number of pairs per measurement.
const replicates = 1001

func measurePair(read func() int64) clockPair {
	f0 := read()
	w := time.Now().UnixNano()
	f1 := read()
	return clockPair{wall: w, tick: f0 + (f1-f0)/2}
}

func measurePairs(read func() int64) []clockPair {
	for range 5 { // warm up, as ApproximateClock does
		_ = read()
		_ = time.Now()
	}
	out := make([]clockPair, replicates)
	for i := range out {
		out[i] = measurePair(read)
	}
	return out
}

// converter maps ticks to epoch nanoseconds: ApproximateClock's makeConverter
// (docs/reference/allocator-semantics.md §6), from pairs measured at allocator
// construction and pairs measured when converting.
type converter struct {
	t0, t0Tick int64
	scale      float64
	exact      bool // ticks are epoch ns already
}

func makeConverter(start, end []clockPair) converter {
	scales := make([]float64, len(start))
	for i := range start {
		dt := end[i].tick - start[i].tick
		if dt <= 0 {
			scales[i] = 1
			continue
		}
		scales[i] = float64(end[i].wall-start[i].wall) / float64(dt)
	}
	slices.Sort(scales)
	scale := scales[len(scales)/2+1]
	t0, t0Tick := start[0].wall, start[0].tick
	corr := make([]int64, len(start))
	for i := range start {
		corr[i] = (start[i].wall - t0) - int64(float64(start[i].tick-t0Tick)*scale)
	}
	return converter{t0: t0 + corr[len(corr)/2+1], t0Tick: t0Tick, scale: scale}
}

func (c converter) nanos(t int64) int64 {
	if c.exact {
		return t
	}
	return int64(float64(t-c.t0Tick)*c.scale) + c.t0
}

// micros converts a tick to epoch microseconds.
func (c converter) micros(t int64) int64 { return c.nanos(t) / 1000 }

// approxClock is an allocator's tick source plus its start calibration.
// exact sources (an injected clock read as epoch ns) need no calibration.
type approxClock struct {
	read  func() int64
	exact bool
	start []clockPair
}

func newApproxClock(read func() int64) *approxClock {
	return &approxClock{read: read, start: measurePairs(read)}
}

func newExactClock(read func() int64) *approxClock {
	return &approxClock{read: read, exact: true}
}

// converter calibrates against fresh pairs; ApproximateClock builds one
// per snapshot.
func (c *approxClock) converter() converter {
	if c.exact {
		return converter{exact: true}
	}
	return makeConverter(c.start, measurePairs(c.read))
}
