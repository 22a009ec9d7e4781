package profiler

import (
	"time"

	"golang.org/x/sys/unix"
)

// Clock is the Recorder's time source: Raw is the value written into
// FRAMEWORK files (CLOCK_MONOTONIC_RAW ns, as torch_npu without syscnt),
// Epoch is wall-clock epoch ns.
type Clock interface {
	Raw() int64
	Epoch() int64
}

type systemClock struct{}

func (systemClock) Raw() int64   { return monotonicRaw() }
func (systemClock) Epoch() int64 { return time.Now().UnixNano() }

// SystemClock reads CLOCK_MONOTONIC_RAW and the wall clock.
var SystemClock Clock = systemClock{}

func monotonicRaw() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}

// clockPair reads epoch and CLOCK_MONOTONIC_RAW back to back; the smaller of
// two bracketing reads keeps the pairing error to the read latency.
func clockPair() (epoch, mono int64) {
	m1 := monotonicRaw()
	e := time.Now().UnixNano()
	m2 := monotonicRaw()
	return e, m1 + (m2-m1)/2
}
