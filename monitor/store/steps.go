package store

import "math"

// valueSeries is a byte series as queries read it: the value after entry
// i, and the extremes and first crossing over a range of entries.
type valueSeries interface {
	at(i int) int64
	extremes(i, j int) (MinMax, bool)
	firstAtLeast(i, j int, x int64) int
}

// steps is a byte series that changes at few entries, kept as a step
// function: the positions where its value changes and, as a series with
// its pyramid, the value from each of them on. The reserved bytes change
// only at segment entries and markers, so a log of many entries holds a
// few changes (12 bytes each) instead of 8 bytes and a pyramid an entry.
// It answers as the plain series of every entry's value would.
type steps struct {
	n    int       // entries (values) held, dropped ones included
	from positions // from.at(k): the first entry whose value is vals.at(k)
	vals series    // one value per change: consecutive values differ
	buf  []int64   // appendBatch's changes
}

// step returns the index of the change entry i's value comes from.
func (s *steps) step(i int) int { return s.from.below(int64(i)+1) - 1 }

// at is the value after entry i.
func (s *steps) at(i int) int64 { return s.vals.at(s.step(i)) }

// changed reports whether x differs from the last value (or is the first).
func (s *steps) changed(x int64) bool {
	k := s.vals.v.Len()
	return k == 0 || s.vals.at(k-1) != x
}

// append adds the value after the next entry.
func (s *steps) append(x int64) {
	if s.changed(x) {
		s.from.append(int64(s.n))
		s.vals.append(x)
	}
	s.n++
}

// bulk appends without maintaining the pyramid; call reindex afterwards.
func (s *steps) bulk(x int64) {
	if s.changed(x) {
		s.from.append(int64(s.n))
		s.vals.bulk(x)
	}
	s.n++
}

// reindex rebuilds the pyramid (after bulk appends).
func (s *steps) reindex() { s.vals.reindex() }

// appendBatch appends xs (series.appendBatch).
func (s *steps) appendBatch(xs []int64) {
	s.buf = s.buf[:0]
	last, have := int64(0), s.vals.v.Len() > 0
	if have {
		last = s.vals.at(s.vals.v.Len() - 1)
	}
	for i, x := range xs {
		if !have || x != last {
			s.from.append(int64(s.n + i))
			s.buf = append(s.buf, x)
			last, have = x, true
		}
	}
	s.vals.appendBatch(s.buf)
	s.n += len(xs)
}

// addAll adds c to every value (before the pyramid is built).
func (s *steps) addAll(c int64) {
	s.vals.v.update(func(_ int, xs []int64) {
		for j := range xs {
			xs[j] += c
		}
	})
}

// replaced is s with the first values replaced by the reserved bytes
// after (a source's stated totals), before the pyramid is built.
func (s *steps) replaced(after []Totals) steps {
	var out steps
	w := s.walk(0)
	for i := range s.n {
		x := w.value()
		if i < len(after) {
			x = after[i].Reserved
		}
		out.bulk(x)
	}
	return out
}

// dropBefore releases what only entries before i need.
func (s *steps) dropBefore(i int) {
	if s.n == 0 {
		return
	}
	k := s.step(min(i, s.n-1))
	s.from.dropBefore(k)
	s.vals.dropBefore(k)
}

// extremes returns min and max of the values of entries [i, j); ok is
// false for an empty range.
func (s *steps) extremes(i, j int) (MinMax, bool) {
	i, j = max(i, 0), min(j, s.n)
	if i >= j {
		return MinMax{}, false
	}
	return s.vals.extremes(s.step(i), s.step(j-1)+1)
}

// firstAtLeast returns the first entry in [i, j) whose value is ≥ x, or -1.
func (s *steps) firstAtLeast(i, j int, x int64) int {
	i, j = max(i, 0), min(j, s.n)
	if i >= j {
		return -1
	}
	ki := s.step(i)
	switch k := s.vals.firstAtLeast(ki, s.step(j-1)+1, x); k {
	case -1:
		return -1
	case ki:
		return i
	default:
		return int(s.from.at(k))
	}
}

// walk reads the values of consecutive entries from entry i on.
func (s *steps) walk(i int) stepWalk {
	if s.vals.v.Len() == 0 {
		return stepWalk{s: s, i: i, next: math.MaxInt}
	}
	w := stepWalk{s: s, i: i, k: s.step(i)}
	w.v, w.next = s.vals.at(w.k), w.nextChange()
	return w
}

// stepWalk is a reader of a steps' values entry by entry.
type stepWalk struct {
	s    *steps
	i, k int
	next int // the entry of change k+1
	v    int64
}

func (w *stepWalk) nextChange() int {
	if w.k+1 < w.s.from.Len() {
		return int(w.s.from.at(w.k + 1))
	}
	return math.MaxInt
}

// value returns the value after the walk's entry and moves to the next.
func (w *stepWalk) value() int64 {
	if w.i == w.next {
		w.k++
		w.v, w.next = w.s.vals.at(w.k), w.nextChange()
	}
	w.i++
	return w.v
}
