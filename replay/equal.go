package replay

import (
	"reflect"
	"slices"

	"github.com/npumon/npumon/allocator/snapshot"
)

// SameModel reports whether two snapshots hold the same model. Stack ids
// are table indexes, numbered in the order a decoder first meets each
// distinct stack, so they are not part of the model: an export round trip
// writes segments before traces and may renumber them. Two snapshots are
// the same when everything else is equal and every block, history record,
// segment and trace entry names a stack with the same frames (and every
// entry the same action and strings).
func SameModel(a, b *snapshot.Snapshot) bool {
	return reflect.DeepEqual(canonical(a), canonical(b))
}

// canonical is a copy of s with stack ids renumbered in a fixed walk
// order (segments, their blocks and histories, then traces) and the stack
// table reordered to match; the entries' actions and strings are numbered
// afresh the same way, so two tables that name the same things compare
// equal.
func canonical(s *snapshot.Snapshot) *snapshot.Snapshot {
	out := &snapshot.Snapshot{Settings: s.Settings, ExternalAnnotations: s.ExternalAnnotations, Stacks: []snapshot.Stack{nil},
		Actions: snapshot.NewActionTable(), Texts: snapshot.NewTextTable()}
	ids := map[snapshot.StackID]snapshot.StackID{}
	m := func(id snapshot.StackID) snapshot.StackID {
		st := s.Stack(id)
		if len(st) == 0 {
			return snapshot.NoStack
		}
		n, ok := ids[id]
		if !ok {
			n = snapshot.StackID(len(out.Stacks))
			ids[id] = n
			out.Stacks = append(out.Stacks, st)
		}
		return n
	}
	out.Segments = slices.Clone(s.Segments)
	for i := range out.Segments {
		sg := &out.Segments[i]
		sg.Frames = m(sg.Frames)
		sg.Blocks = slices.Clone(sg.Blocks)
		for j := range sg.Blocks {
			bl := &sg.Blocks[j]
			bl.Frames = m(bl.Frames)
			bl.History = slices.Clone(bl.History)
			for k := range bl.History {
				bl.History[k].Frames = m(bl.History[k].Frames)
			}
		}
	}
	if s.DeviceTraces != nil {
		out.DeviceTraces = make([][]snapshot.TraceEntry, len(s.DeviceTraces))
	}
	for d, tr := range s.DeviceTraces {
		out.DeviceTraces[d] = slices.Clone(tr)
		for i := range out.DeviceTraces[d] {
			e := &out.DeviceTraces[d][i]
			e.Frames = m(e.Frames)
			e.Action = out.Actions.Parse(s.ActionName(e.Action))
			e.CompileContext = out.Texts.Intern(s.Text(e.CompileContext))
			e.UserMetadata = out.Texts.Intern(s.Text(e.UserMetadata))
			if fw := s.ForwardID(d, i); fw != snapshot.NoStack {
				for len(out.Forward) <= d {
					out.Forward = append(out.Forward, nil)
				}
				if out.Forward[d] == nil {
					out.Forward[d] = map[int]snapshot.StackID{}
				}
				out.Forward[d][i] = m(fw)
			}
		}
	}
	return out
}
