package oprange

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
)

type testOps struct {
	s, e   []int64
	skip   []bool
	maxEnd []int64
}

func newTestOps(ops ...[3]int64) *testOps { // start, end, step(1)
	slices.SortStableFunc(ops, func(a, b [3]int64) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(b[1], a[1])) })
	t := &testOps{}
	for i, o := range ops {
		t.s, t.e, t.skip = append(t.s, o[0]), append(t.e, o[1]), append(t.skip, o[2] == 1)
		m := o[1]
		if i > 0 {
			m = max(m, t.maxEnd[i-1])
		}
		t.maxEnd = append(t.maxEnd, m)
	}
	return t
}

func (t *testOps) Len() int           { return len(t.s) }
func (t *testOps) Start(i int) int64  { return t.s[i] }
func (t *testOps) End(i int) int64    { return t.e[i] }
func (t *testOps) MaxEnd(i int) int64 { return t.maxEnd[i] }
func (t *testOps) Skip(i int) bool    { return t.skip[i] }

// TestInnermost pins the attribution rules of docs/timeline.md.
func TestInnermost(t *testing.T) {
	ops := newTestOps(
		[3]int64{0, 1000, 1},  // a step marker: never attributed to
		[3]int64{100, 400, 0}, // outer
		[3]int64{150, 300, 0}, // inner
		[3]int64{150, 200, 0}, // same start, shorter: more inner
		[3]int64{400, 450, 0}, // sibling starting where outer ends
		[3]int64{500, 500, 0}, // zero length
		[3]int64{600, 700, 0}, // two identical intervals: the first is kept
		[3]int64{600, 700, 0},
	)
	at := func(t0 int64) [2]int64 {
		i := Innermost(ops, t0)
		if i < 0 {
			return [2]int64{-1, -1}
		}
		return [2]int64{ops.Start(i), ops.End(i)}
	}
	for i, c := range []struct {
		t    int64
		want [2]int64
	}{
		{50, [2]int64{-1, -1}},    // only the step
		{100, [2]int64{100, 400}}, // start included
		{160, [2]int64{150, 200}},
		{200, [2]int64{150, 200}}, // end included
		{250, [2]int64{150, 300}},
		{300, [2]int64{150, 300}},
		{399, [2]int64{100, 400}},
		{400, [2]int64{400, 450}}, // the sibling starting at t wins over the op ending at t
		{450, [2]int64{400, 450}},
		{451, [2]int64{-1, -1}},
		{500, [2]int64{500, 500}},
		{650, [2]int64{600, 700}},
		{2000, [2]int64{-1, -1}},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := at(c.t); got != c.want {
				t.Errorf("t=%d: op %v, want %v", c.t, got, c.want)
			}
		})
	}
	if i := Innermost(ops, 650); i != 6 {
		t.Errorf("equal intervals: op %d, want the first (6)", i)
	}
	if Innermost(newTestOps(), 5) != -1 {
		t.Error("no ops")
	}
}
