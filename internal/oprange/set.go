package oprange

import (
	"cmp"
	"slices"
)

// Sorted is ops already in Table order with their prefix-max ends
// (MaxEnds) as a Table — how a holder of a growing op list (the monitor
// Store, the TUI's op table) searches it without a copy. WithSteps makes
// step markers attributable too (the op table's fallback between ops).
type Sorted struct {
	Ops       []Op
	Ends      []int64 // MaxEnds(Ops)
	WithSteps bool
}

func (t Sorted) Len() int           { return len(t.Ops) }
func (t Sorted) Start(i int) int64  { return t.Ops[i].StartUS }
func (t Sorted) End(i int) int64    { return t.Ops[i].EndUS }
func (t Sorted) MaxEnd(i int) int64 { return t.Ends[i] }
func (t Sorted) Skip(i int) bool    { return !t.WithSteps && t.Ops[i].IsStep }

// Set is a set of ops sorted for attribution (a Sorted of its own copy,
// and its Index). A nil *Set has no ops.
type Set struct {
	t Sorted
	x Index
}

// NewSet sorts a copy of ops in Table order.
func NewSet(ops []Op) *Set {
	o := slices.Clone(ops)
	slices.SortStableFunc(o, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.StartUS, b.StartUS), cmp.Compare(b.EndUS, a.EndUS))
	})
	s := &Set{t: Sorted{Ops: o, Ends: MaxEnds(o, nil)}}
	s.x.Update(s.t, 0)
	return s
}

// MaxEnds appends the prefix-max ends of ops (in Table order) to dst.
func MaxEnds(ops []Op, dst []int64) []int64 {
	for i := range ops {
		m := ops[i].EndUS
		if n := len(dst); n > 0 {
			m = max(m, dst[n-1])
		}
		dst = append(dst, m)
	}
	return dst
}

// All is every op in Table order (nil for a nil s); the caller must not
// change it.
func (s *Set) All() []Op {
	if s == nil {
		return nil
	}
	return s.t.Ops
}

// At names the op an entry at time t is attributed to ("" when none or t
// is 0, an entry without a time).
func (s *Set) At(t int64) string {
	if s == nil || t == 0 {
		return ""
	}
	if i := s.x.Innermost(s.t, t); i >= 0 {
		return s.t.Ops[i].Name
	}
	return ""
}

// In names the op of an entry known only to lie in (lo, hi) (Interval).
func (s *Set) In(lo, hi int64) string {
	if s == nil || lo == 0 {
		return ""
	}
	if i := s.x.Interval(s.t, lo, hi); i >= 0 {
		return s.t.Ops[i].Name
	}
	return ""
}

// Steps returns the step markers, ordered by end.
func (s *Set) Steps() []Op {
	var out []Op
	for _, op := range s.All() {
		if op.IsStep {
			out = append(out, op)
		}
	}
	slices.SortStableFunc(out, func(a, b Op) int { return cmp.Compare(a.EndUS, b.EndUS) })
	return out
}
