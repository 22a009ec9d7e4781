package replay

import (
	"cmp"
	"slices"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/oprange"
)

// AnnotationOps pairs a snapshot's annotation edges on device into ranges:
// external_annotations (torch ≥ 2.5) and user_defined trace entries
// (torch 2.4, frames [{name: START|END, filename: range name}]). A START
// is closed by the next END of the same name; ranges left open are
// dropped. ProfilerStep#N ranges are step markers.
func AnnotationOps(s *snapshot.Snapshot, device int) []oprange.Op {
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
	var out []oprange.Op
	for _, e := range edges {
		if e.start {
			open[e.name] = append(open[e.name], e.t)
			continue
		}
		st := open[e.name]
		if len(st) == 0 {
			continue
		}
		op := oprange.Op{Name: e.name, StartUS: st[len(st)-1], EndUS: e.t, Seq: -1, Step: -1}
		open[e.name] = st[:len(st)-1]
		if n, ok := oprange.StepNumber(e.name); ok {
			op.Step, op.IsStep = n, true
		}
		out = append(out, op)
	}
	return out
}
