package store

// series is one byte series (value right after each entry) with a
// min/max pyramid: level L holds the extremes of fanout^L consecutive
// values, so the extremes of any range cost O(fanout · levels) instead of
// O(range). Appending updates the items covering the new value, from the
// bottom up to the first that already spans it. Values and levels are
// chunked and packed (values): a growing series is never copied, and a
// full chunk takes 4 bytes a value.
type series struct {
	v      values
	levels []mmLevel // levels[0] summarizes fanout values of v
}

const fanoutBits = 3
const fanout = 1 << fanoutBits

func (s *series) append(x int64) {
	i := s.v.Len()
	s.v.append(x)
	for l := 0; ; l++ {
		if l == len(s.levels) {
			s.levels = append(s.levels, s.fold(l))
		} else if k := i >> (fanoutBits * (l + 1)); k == s.levels[l].Len() {
			s.levels[l].append(MinMax{x, x})
		} else {
			lv := &s.levels[l]
			if m := lv.at(k); x >= m.Min && x <= m.Max {
				return // the item did not change, so neither do those above it
			}
			lv.widen(k, MinMax{x, x})
		}
		// a level with one item covers everything so far; higher levels are
		// created (folded) only once it has a second.
		if s.levels[l].Len() <= 1 {
			return
		}
	}
}

// dropBefore releases the values before i and the pyramid items covering
// only them (whole chunks); extremes and firstAtLeast must then be asked
// about ranges from i on.
func (s *series) dropBefore(i int) {
	s.v.dropBefore(i)
	for l := range s.levels {
		s.levels[l].dropBefore(i >> (fanoutBits * (l + 1)))
	}
}

// at is value i.
func (s *series) at(i int) int64 { return s.v.at(i) }

// bulk appends without maintaining the pyramid; call reindex afterwards.
func (s *series) bulk(x int64) { s.v.append(x) }

// reindex rebuilds the pyramid from the values (after bulk appends).
func (s *series) reindex() {
	s.levels = s.levels[:0]
	if s.v.Len() == 0 {
		return
	}
	for l := 0; l == 0 || s.levels[l-1].Len() > 1; l++ {
		s.levels = append(s.levels, s.fold(l))
	}
}

// fold computes level l from the level below it (raw values for l = 0).
func (s *series) fold(l int) mmLevel {
	var out mmLevel
	var cur MinMax
	n := 0
	if l == 0 {
		s.v.each(0, s.v.Len(), func(p []int64) {
			for _, x := range p {
				if n&(fanout-1) == 0 {
					if n > 0 {
						out.append(cur)
					}
					cur = MinMax{x, x}
				} else {
					cur.Min, cur.Max = min(cur.Min, x), max(cur.Max, x)
				}
				n++
			}
		})
	} else {
		below := &s.levels[l-1]
		for k := range below.Len() {
			x := below.at(k)
			if n&(fanout-1) == 0 {
				if n > 0 {
					out.append(cur)
				}
				cur = x
			} else {
				cur.Min, cur.Max = min(cur.Min, x.Min), max(cur.Max, x.Max)
			}
			n++
		}
	}
	if n > 0 {
		out.append(cur)
	}
	return out
}

// extremes returns min and max of v[i:j]; ok is false for an empty range.
// It climbs the pyramid: at each level it folds the partial groups at both
// ends and continues with the whole groups one level up.
func (s *series) extremes(i, j int) (mm MinMax, ok bool) {
	i, j = max(i, 0), min(j, s.v.Len())
	if i >= j {
		return MinMax{}, false
	}
	lo, hi := s.v.at(i), s.v.at(i)
	scanV := func(a, b int) { lo, hi = s.v.extremes(a, b, lo, hi) }
	scanL := func(lv *mmLevel, a, b int) { lo, hi = lv.extremes(a, b, lo, hi) }
	for l := -1; ; l++ {
		ih := (i + fanout - 1) &^ (fanout - 1)
		jl := j &^ (fanout - 1)
		if l+1 >= len(s.levels) || ih >= jl {
			if l < 0 {
				scanV(i, j)
			} else {
				scanL(&s.levels[l], i, j)
			}
			return MinMax{lo, hi}, true
		}
		if l < 0 {
			scanV(i, ih)
			scanV(jl, j)
		} else {
			scanL(&s.levels[l], i, ih)
			scanL(&s.levels[l], jl, j)
		}
		i, j = ih>>fanoutBits, jl>>fanoutBits
	}
}

// firstAtLeast returns the first index in [i, j) whose value is ≥ x, or -1.
func (s *series) firstAtLeast(i, j int, x int64) int {
	if j > s.v.Len() {
		j = s.v.Len()
	}
	for i < j {
		skipped := false
		for l := len(s.levels) - 1; l >= 0; l-- {
			sh := fanoutBits * (l + 1)
			span := 1 << sh
			if i&(span-1) == 0 && i+span <= j && s.levels[l].at(i>>sh).Max < x {
				i += span
				skipped = true
				break
			}
		}
		if skipped {
			continue
		}
		if s.v.at(i) >= x {
			return i
		}
		i++
	}
	return -1
}

// appendBatch appends xs, then brings the pyramid up to date in one pass
// per level over the items the batch touched (the same pyramid append
// builds value by value, for a fraction of the work: a live batch touches
// len(xs)/8 items at level 0, len(xs)/64 at level 1, …).
func (s *series) appendBatch(xs []int64) {
	if len(xs) == 0 {
		return
	}
	i0 := s.v.Len()
	s.v.appendAll(xs)
	if len(s.levels) == 0 {
		s.levels = append(s.levels, s.fold(0))
		s.foldUp()
		return
	}
	// level 0 from the new values: items i0>>fanoutBits … (n-1)>>fanoutBits
	lv := &s.levels[0]
	for j := 0; j < len(xs); {
		v := i0 + j
		k := v >> fanoutBits
		end := min(len(xs), j+fanout-v&(fanout-1)) // the rest of item k's values in xs
		m := MinMax{xs[j], xs[j]}
		for _, x := range xs[j+1 : end] {
			m.Min, m.Max = min(m.Min, x), max(m.Max, x)
		}
		lv.widen(k, m)
		j = end
	}
	// each level above from the items changed below it, [lo, hi)
	lo, hi := i0>>fanoutBits, s.levels[0].Len()
	for l := 1; ; l++ {
		if s.levels[l-1].Len() <= 1 {
			return // a level with one item covers everything so far
		}
		if l == len(s.levels) {
			s.foldUp()
			return
		}
		below, lv := &s.levels[l-1], &s.levels[l]
		for c := lo; c < hi; {
			k := c >> fanoutBits
			end := min(hi, (k+1)<<fanoutBits)
			m := below.at(c)
			m.Min, m.Max = below.extremes(c+1, end, m.Min, m.Max)
			lv.widen(k, m)
			c = end
		}
		lo, hi = lo>>fanoutBits, lv.Len()
	}
}

// foldUp adds the levels missing above the top one, until a level has a
// single item (as append does when the top level gets its second item).
func (s *series) foldUp() {
	for s.levels[len(s.levels)-1].Len() > 1 {
		s.levels = append(s.levels, s.fold(len(s.levels)))
	}
}
