// Package oprange is the one definition of an op range on the time axis
// and of op attribution (docs/timeline.md, "Op attribution"): a trace
// entry belongs to the innermost op whose interval contains its time, ends
// included; ProfilerStep#N markers are never attributed to. The monitor
// Store (live, watch, replay), the TUI, replay/explain and the profiler's
// own analysis (operator_memory.csv) all attribute through Innermost, or
// through an Index over the same table, which gives its answer in O(log n).
// A leaf: it imports nothing of npumon's.
package oprange

import (
	"sort"
	"strconv"
	"strings"
)

// Op is one op range keyed by epoch time (µs): a torch op, a user range,
// an annotation or a ProfilerStep#N marker. It is the one op type above
// the profiler's own read records (profiler.Op, in ns with every field of
// its formats).
type Op struct {
	Name      string
	StartUS   int64
	EndUS     int64
	Thread    uint64
	Seq       int64 // profiler sequence number, -1 if none
	Device    int
	MemDelta  int64 // Σ allocated bytes change of the memory records inside the op
	Step      int64 // ProfilerStep#N the op belongs to (of a marker: its N), -1 if none
	IsStep    bool  // the op is a ProfilerStep#N marker itself
	InputDims string
}

// StepPrefix is the name torch's profiler gives each step's range, followed
// by the step number.
const StepPrefix = "ProfilerStep#"

// StepName is step n's range name, "ProfilerStep#n".
func StepName(n int64) string { return StepPrefix + strconv.FormatInt(n, 10) }

// StepNumber parses "ProfilerStep#N"; the one parser of step names.
func StepNumber(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, StepPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// Contains reports whether time t lies in the op interval [start, end],
// both ends included (an op of zero length contains its one instant).
func Contains(start, end, t int64) bool { return start <= t && t <= end }

// Inner reports whether op a ([aStart, aEnd]) is more inner than op b
// when both contain a time: the later start wins; at equal starts the
// earlier end (the shorter op). Equal intervals are not inner to each
// other, so the first one found (in start order) is kept.
func Inner(aStart, aEnd, bStart, bEnd int64) bool {
	return aStart > bStart || (aStart == bStart && aEnd < bEnd)
}

// Table is what Innermost searches: Len ops sorted by start ascending,
// end descending among equal starts (an outer op first), MaxEnd(i) the
// largest end of ops 0…i, and Skip(i) true for ops that are never
// attributed to (ProfilerStep#N markers).
type Table interface {
	Len() int
	Start(i int) int64
	End(i int) int64
	MaxEnd(i int) int64
	Skip(i int) bool
}

// Innermost returns the index of the innermost op of tab containing t, or
// -1 when no op does.
func Innermost(tab Table, t int64) int {
	n := tab.Len()
	// first op whose prefix-max end reaches t: no earlier op can contain t
	lo := sort.Search(n, func(i int) bool { return tab.MaxEnd(i) >= t })
	best := -1
	for i := lo; i < n && tab.Start(i) <= t; i++ {
		if tab.Skip(i) || !Contains(tab.Start(i), tab.End(i), t) {
			continue
		}
		if best < 0 || Inner(tab.Start(i), tab.End(i), tab.Start(best), tab.End(best)) {
			best = i
		}
	}
	return best
}

// Interval returns the op of an entry known only to lie in (lo, hi): a
// trace entry whose time was recovered as an interval (monitor/align;
// hi ≤ 0 when no later time is known). It is the innermost op at the start
// of the first op that begins inside the interval — what ran next after
// the last known moment — or, when none begins there, the innermost op
// containing lo; -1 when there is neither.
func Interval(tab Table, lo, hi int64) int {
	return interval(tab, tab.Len(), lo, hi, func(t int64) int { return Innermost(tab, t) })
}

// interval is Interval over the first n ops of tab, innermost finding the
// innermost op at a time.
func interval(tab Table, n int, lo, hi int64, innermost func(t int64) int) int {
	k := sort.Search(n, func(i int) bool { return tab.Start(i) > lo })
	for i := k; i < n && (hi <= 0 || tab.Start(i) < hi); i++ {
		if !tab.Skip(i) {
			return innermost(tab.Start(i))
		}
	}
	return innermost(lo)
}
