package oprange

import (
	"cmp"
	"slices"
)

// Set is a set of ops sorted for attribution, with the prefix-max ends
// Innermost needs. A nil *Set has no ops.
type Set struct {
	ops    []Op
	maxEnd []int64
}

// NewSet sorts a copy of ops in Table order.
func NewSet(ops []Op) *Set {
	s := &Set{ops: slices.Clone(ops)}
	slices.SortStableFunc(s.ops, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.StartUS, b.StartUS), cmp.Compare(b.EndUS, a.EndUS))
	})
	s.maxEnd = MaxEnds(s.ops, nil)
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

func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.ops)
}
func (s *Set) Start(i int) int64  { return s.ops[i].StartUS }
func (s *Set) End(i int) int64    { return s.ops[i].EndUS }
func (s *Set) MaxEnd(i int) int64 { return s.maxEnd[i] }
func (s *Set) Skip(i int) bool    { return s.ops[i].IsStep }

// Op returns op i.
func (s *Set) Op(i int) Op { return s.ops[i] }

// All is every op in Table order (nil for a nil s); the caller must not
// change it.
func (s *Set) All() []Op {
	if s == nil {
		return nil
	}
	return s.ops
}

// At names the op an entry at time t is attributed to ("" when none or t
// is 0, an entry without a time).
func (s *Set) At(t int64) string {
	if s == nil || t == 0 {
		return ""
	}
	if i := Innermost(s, t); i >= 0 {
		return s.ops[i].Name
	}
	return ""
}

// In names the op of an entry known only to lie in (lo, hi) (Interval).
func (s *Set) In(lo, hi int64) string {
	if s == nil || lo == 0 {
		return ""
	}
	if i := Interval(s, lo, hi); i >= 0 {
		return s.ops[i].Name
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
