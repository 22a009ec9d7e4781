package allocator

import "time"

// syncSample is one counter read bracketed by two reads of the monotonic
// clock, on one CPU.
type syncSample struct{ before, tick, after int64 }

func (s syncSample) width() int64 { return s.after - s.before }
func (s syncSample) mid() int64   { return s.before + s.width()/2 }

// bracket returns the tightest of a few bracketed reads: a read the thread
// was preempted around is wide and loses.
func bracket(read func() int64) syncSample {
	var best syncSample
	for i := range 16 {
		b := nanotime()
		t := read()
		s := syncSample{b, t, nanotime()}
		if i == 0 || s.width() < best.width() {
			best = s
		}
	}
	return best
}

// syncTolerance is how far a CPU's counter may sit off the line of the
// others: below the trace's microsecond resolution.
const syncTolerance = 1000 // ns

// counterInSync reports whether ticks of read, taken on every CPU of cpus
// (pin moves the calling thread onto one), fall on one line against the
// monotonic clock within syncTolerance: the line through two reads on the
// first CPU, at least a millisecond apart, with reads on all the others
// in between. A counter that starts at different values on different
// CPUs, or runs at a different rate from the clock, fails it.
func counterInSync(read func() int64, cpus []int, pin func(cpu int) error) bool {
	if len(cpus) == 0 || pin(cpus[0]) != nil {
		return false
	}
	first := bracket(read)
	others := make([]syncSample, 0, len(cpus)-1)
	for _, c := range cpus[1:] {
		if pin(c) != nil {
			return false
		}
		others = append(others, bracket(read))
	}
	if pin(cpus[0]) != nil {
		return false
	}
	// A span long enough that the bracket widths barely tilt the line.
	if d := time.Duration(first.after + int64(time.Millisecond) - nanotime()); d > 0 {
		time.Sleep(d)
	}
	last := bracket(read)
	dt := last.tick - first.tick
	if dt <= 0 {
		return false
	}
	scale := float64(last.mid()-first.mid()) / float64(dt)
	slack := syncTolerance + (first.width()+last.width())/2
	for _, s := range others {
		at := first.mid() + int64(float64(s.tick-first.tick)*scale)
		if at < s.before-slack || at > s.after+slack {
			return false
		}
	}
	return true
}
