package explain

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Op is an op or annotated range on the trace's time axis (epoch µs).
type Op struct {
	Name           string
	StartUS, EndUS int64
	IsStep         bool  // a ProfilerStep#N marker
	Step           int64 // N of a step marker
}

// Ops is a set of ops sorted for attribution (replay.InnermostOp).
type Ops struct {
	ops    []Op
	maxEnd []int64
}

// NewOps sorts ops (start ascending, end descending) for attribution.
func NewOps(ops []Op) *Ops {
	o := &Ops{ops: slices.Clone(ops)}
	slices.SortStableFunc(o.ops, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.StartUS, b.StartUS), cmp.Compare(b.EndUS, a.EndUS))
	})
	o.maxEnd = make([]int64, len(o.ops))
	for i := range o.ops {
		o.maxEnd[i] = o.ops[i].EndUS
		if i > 0 {
			o.maxEnd[i] = max(o.maxEnd[i], o.maxEnd[i-1])
		}
	}
	return o
}

func (o *Ops) Len() int           { return len(o.ops) }
func (o *Ops) Start(i int) int64  { return o.ops[i].StartUS }
func (o *Ops) End(i int) int64    { return o.ops[i].EndUS }
func (o *Ops) MaxEnd(i int) int64 { return o.maxEnd[i] }
func (o *Ops) Skip(i int) bool    { return o.ops[i].IsStep }

// At names the op an entry at time t is attributed to ("" when none or t
// is 0, an entry without a time).
func (o *Ops) At(t int64) string {
	if o == nil || t == 0 {
		return ""
	}
	if i := replay.InnermostOp(o, t); i >= 0 {
		return o.ops[i].Name
	}
	return ""
}

// all is every op, sorted for attribution (nil for nil o).
func (o *Ops) all() []Op {
	if o == nil {
		return nil
	}
	return o.ops
}

// In names the op of an entry known only to lie in (lo, hi)
// (replay.IntervalOp).
func (o *Ops) In(lo, hi int64) string {
	if o == nil || lo == 0 {
		return ""
	}
	if i := replay.IntervalOp(o, lo, hi); i >= 0 {
		return o.ops[i].Name
	}
	return ""
}

// Steps returns the step markers, ordered by end.
func (o *Ops) Steps() []Op {
	if o == nil {
		return nil
	}
	var out []Op
	for _, op := range o.ops {
		if op.IsStep {
			out = append(out, op)
		}
	}
	slices.SortStableFunc(out, func(a, b Op) int { return cmp.Compare(a.EndUS, b.EndUS) })
	return out
}

// StepNumber parses "ProfilerStep#N" (the name torch's profiler gives each
// step's range).
func StepNumber(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, "ProfilerStep#")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil
}

// AnnotationOps pairs a snapshot's annotation edges on device into ranges:
// external_annotations (torch ≥ 2.5) and user_defined trace entries
// (torch 2.4, frames [{name: START|END, filename: range name}]). A START
// is closed by the next END of the same name; ranges left open are
// dropped. ProfilerStep#N ranges are step markers.
func AnnotationOps(s *snapshot.Snapshot, device int) []Op {
	type edge struct {
		name  string
		start bool
		t     int64
	}
	var edges []edge
	for _, a := range s.ExternalAnnotations {
		if a.Device == device && a.TimeUS != 0 {
			edges = append(edges, edge{a.Name, a.Stage == "START", a.TimeUS})
		}
	}
	if device >= 0 && device < len(s.DeviceTraces) {
		for i := range s.DeviceTraces[device] {
			e := &s.DeviceTraces[device][i]
			if e.Action != snapshot.ActionUserDefined || e.TimeUS == 0 {
				continue
			}
			if st := s.Stack(e.Frames); len(st) > 0 {
				edges = append(edges, edge{st[0].Filename, st[0].Name == "START", e.TimeUS})
			}
		}
	}
	slices.SortStableFunc(edges, func(a, b edge) int { return cmp.Compare(a.t, b.t) })
	open := map[string][]int64{}
	var out []Op
	for _, e := range edges {
		if e.start {
			open[e.name] = append(open[e.name], e.t)
			continue
		}
		st := open[e.name]
		if len(st) == 0 {
			continue
		}
		op := Op{Name: e.name, StartUS: st[len(st)-1], EndUS: e.t}
		open[e.name] = st[:len(st)-1]
		op.Step, op.IsStep = StepNumber(e.name)
		out = append(out, op)
	}
	return out
}
