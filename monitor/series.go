package monitor

// series is one byte series (value right after each entry) with a
// min/max pyramid: level L holds the extremes of fanout^L consecutive
// values, so the extremes of any range cost O(fanout · levels) instead of
// O(range). Appending updates one item per level.
type series struct {
	v      []int64
	levels [][]MinMax // levels[0] summarizes fanout values of v
}

const fanoutBits = 3
const fanout = 1 << fanoutBits

func (s *series) append(x int64) {
	i := len(s.v)
	s.v = append(s.v, x)
	for l := 0; ; l++ {
		if l == len(s.levels) {
			s.levels = append(s.levels, s.fold(l))
		} else if k := i >> (fanoutBits * (l + 1)); k == len(s.levels[l]) {
			s.levels[l] = append(s.levels[l], MinMax{x, x})
		} else {
			m := &s.levels[l][k]
			m.Min = min(m.Min, x)
			m.Max = max(m.Max, x)
		}
		// a level with one item covers everything so far; higher levels are
		// created (folded) only once it has a second.
		if len(s.levels[l]) <= 1 {
			return
		}
	}
}

// bulk appends without maintaining the pyramid; call reindex afterwards.
func (s *series) bulk(x int64) { s.v = append(s.v, x) }

// reindex rebuilds the pyramid from the values (after bulk appends).
func (s *series) reindex() {
	s.levels = s.levels[:0]
	if len(s.v) == 0 {
		return
	}
	for l := 0; l == 0 || len(s.levels[l-1]) > 1; l++ {
		s.levels = append(s.levels, s.fold(l))
	}
}

// fold computes level l from the level below it (raw values for l = 0).
func (s *series) fold(l int) []MinMax {
	if l == 0 {
		out := make([]MinMax, 0, (len(s.v)+fanout-1)/fanout)
		for i, x := range s.v {
			if i&(fanout-1) == 0 {
				out = append(out, MinMax{x, x})
			} else {
				m := &out[len(out)-1]
				m.Min, m.Max = min(m.Min, x), max(m.Max, x)
			}
		}
		return out
	}
	below := s.levels[l-1]
	out := make([]MinMax, 0, (len(below)+fanout-1)/fanout)
	for i, x := range below {
		if i&(fanout-1) == 0 {
			out = append(out, x)
		} else {
			m := &out[len(out)-1]
			m.Min, m.Max = min(m.Min, x.Min), max(m.Max, x.Max)
		}
	}
	return out
}

// extremes returns min and max of v[i:j]; ok is false for an empty range.
// It climbs the pyramid: at each level it folds the partial groups at both
// ends and continues with the whole groups one level up.
func (s *series) extremes(i, j int) (mm MinMax, ok bool) {
	i, j = max(i, 0), min(j, len(s.v))
	if i >= j {
		return MinMax{}, false
	}
	lo, hi := s.v[i], s.v[i]
	scanV := func(a, b int) {
		for _, x := range s.v[a:b] {
			lo, hi = min(lo, x), max(hi, x)
		}
	}
	scanL := func(lv []MinMax, a, b int) {
		for _, m := range lv[a:b] {
			lo, hi = min(lo, m.Min), max(hi, m.Max)
		}
	}
	for l := -1; ; l++ {
		ih := (i + fanout - 1) &^ (fanout - 1)
		jl := j &^ (fanout - 1)
		if l+1 >= len(s.levels) || ih >= jl {
			if l < 0 {
				scanV(i, j)
			} else {
				scanL(s.levels[l], i, j)
			}
			return MinMax{lo, hi}, true
		}
		if l < 0 {
			scanV(i, ih)
			scanV(jl, j)
		} else {
			scanL(s.levels[l], i, ih)
			scanL(s.levels[l], jl, j)
		}
		i, j = ih>>fanoutBits, jl>>fanoutBits
	}
}

// firstAtLeast returns the first index in [i, j) whose value is ≥ x, or -1.
func (s *series) firstAtLeast(i, j int, x int64) int {
	if j > len(s.v) {
		j = len(s.v)
	}
	for i < j {
		skipped := false
		for l := len(s.levels) - 1; l >= 0; l-- {
			sh := fanoutBits * (l + 1)
			span := 1 << sh
			if i&(span-1) == 0 && i+span <= j && s.levels[l][i>>sh].Max < x {
				i += span
				skipped = true
				break
			}
		}
		if skipped {
			continue
		}
		if s.v[i] >= x {
			return i
		}
		i++
	}
	return -1
}

// refresh recomputes the pyramid items covering index i after v[i] changed.
func (s *series) refresh(i int) {
	for l := range s.levels {
		sh := fanoutBits * (l + 1)
		k := i >> sh
		lo := k << fanoutBits
		var m MinMax
		if l == 0 {
			hi := min(len(s.v), lo+fanout)
			m = MinMax{s.v[lo], s.v[lo]}
			for _, x := range s.v[lo:hi] {
				m.Min, m.Max = min(m.Min, x), max(m.Max, x)
			}
		} else {
			below := s.levels[l-1]
			hi := min(len(below), lo+fanout)
			m = below[lo]
			for _, x := range below[lo:hi] {
				m.Min, m.Max = min(m.Min, x.Min), max(m.Max, x.Max)
			}
		}
		s.levels[l][k] = m
	}
}
