package replay

// Op attribution (docs/timeline.md, "Op attribution"): a trace entry
// belongs to the innermost op whose interval contains its time, ends
// included. This file is the one definition; the monitor Store (live,
// watch, replay), the TUI and replay/explain all call InnermostOp.

// OpContains reports whether time t lies in the op interval [start, end],
// both ends included (an op of zero length contains its one instant).
func OpContains(start, end, t int64) bool { return start <= t && t <= end }

// OpInner reports whether op a ([aStart, aEnd]) is more inner than op b
// when both contain a time: the later start wins; at equal starts the
// earlier end (the shorter op). Equal intervals are not inner to each
// other, so the first one found (in start order) is kept.
func OpInner(aStart, aEnd, bStart, bEnd int64) bool {
	return aStart > bStart || (aStart == bStart && aEnd < bEnd)
}

// OpTable is what InnermostOp searches: Len ops sorted by start ascending
// (end descending among equal starts, so an outer op comes first),
// MaxEnd(i) the largest end of ops 0…i, and Skip(i) true for ops that are
// never attributed to (ProfilerStep#N markers).
type OpTable interface {
	Len() int
	Start(i int) int64
	End(i int) int64
	MaxEnd(i int) int64
	Skip(i int) bool
}

// InnermostOp returns the index of the innermost op of tab containing t,
// or -1 when no op does.
func InnermostOp(tab OpTable, t int64) int {
	n := tab.Len()
	// first op whose prefix-max end reaches t: no earlier op can contain t
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if tab.MaxEnd(m) >= t {
			hi = m
		} else {
			lo = m + 1
		}
	}
	best := -1
	for i := lo; i < n && tab.Start(i) <= t; i++ {
		if tab.Skip(i) || !OpContains(tab.Start(i), tab.End(i), t) {
			continue
		}
		if best < 0 || OpInner(tab.Start(i), tab.End(i), tab.Start(best), tab.End(best)) {
			best = i
		}
	}
	return best
}

// IntervalOp returns the op of an entry known only to lie in (lo, hi): a
// trace entry whose time was recovered as an interval (profiler/align;
// hi ≤ 0 when no later time is known). It is the innermost op at the start
// of the first op that begins inside the interval — what ran next after
// the last known moment — or, when none begins there, the innermost op
// containing lo; -1 when there is neither.
func IntervalOp(tab OpTable, lo, hi int64) int {
	n := tab.Len()
	k := sortSearch(n, func(i int) bool { return tab.Start(i) > lo })
	for i := k; i < n && (hi <= 0 || tab.Start(i) < hi); i++ {
		if !tab.Skip(i) {
			return InnermostOp(tab, tab.Start(i))
		}
	}
	return InnermostOp(tab, lo)
}

func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f(m) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}
