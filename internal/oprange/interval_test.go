package oprange

import "testing"

type opTab []struct {
	s, e int64
	step bool
}

func (t opTab) Len() int          { return len(t) }
func (t opTab) Start(i int) int64 { return t[i].s }
func (t opTab) End(i int) int64   { return t[i].e }
func (t opTab) MaxEnd(i int) int64 {
	m := t[0].e
	for _, o := range t[:i+1] {
		m = max(m, o.e)
	}
	return m
}
func (t opTab) Skip(i int) bool { return t[i].step }

// TestInterval: an entry known to lie in (lo, hi) belongs to the first op
// that begins inside the interval (steps never), else to the op holding lo.
func TestInterval(t *testing.T) {
	tab := opTab{{0, 100, true}, {10, 40, false}, {41, 60, false}, {42, 50, false}, {70, 80, false}}
	for _, c := range []struct {
		lo, hi int64
		want   int
	}{
		{20, 45, 2}, // op 2 begins at 41 (op 3, starting later, is not first)
		{20, 0, 2},  // no upper bound
		{20, 30, 1}, // nothing begins inside: the op holding lo
		{85, 0, -1}, // nothing
		{60, 75, 4}, // op 4 begins at 70
		{5, 10, -1}, // op 1 begins at 10, not inside (5, 10); 5 lies in no op but the step
	} {
		if got := Interval(tab, c.lo, c.hi); got != c.want {
			t.Errorf("(%d, %d): op %d, want %d", c.lo, c.hi, got, c.want)
		}
	}
}
