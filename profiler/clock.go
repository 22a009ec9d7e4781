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

// systemClock anchors CLOCK_MONOTONIC_RAW once and advances it with Go's
// vDSO monotonic clock: clock_gettime(CLOCK_MONOTONIC_RAW) is a real system
// call from Go (~250 ns), too slow for per-op timestamps. The two clocks
// differ only by NTP slew (ppm), and the Recorder's own files are converted
// with its own fixed pairing, so their epoch times stay exact.
type systemClock struct {
	base    time.Time
	rawBase int64
}

func (c *systemClock) Raw() int64   { return c.rawBase + int64(time.Since(c.base)) }
func (c *systemClock) Epoch() int64 { return time.Now().UnixNano() }

// SystemClock is CLOCK_MONOTONIC_RAW (anchored at start-up) and the wall clock.
var SystemClock Clock = newSystemClock()

func newSystemClock() *systemClock {
	raw := monotonicRaw()
	return &systemClock{base: time.Now(), rawBase: raw}
}

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
