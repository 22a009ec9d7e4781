package replay

import (
	"reflect"
	"slices"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// recordSink keeps what a TraceSink is given, checking each batch's stack
// ids resolve in the tables handed with it.
type recordSink struct {
	t       *testing.T
	lists   [][]snapshot.TraceEntry
	batches int
}

func (r *recordSink) TraceBatch(list int, e []snapshot.TraceEntry, tb *TraceTables) {
	for len(r.lists) <= list {
		r.lists = append(r.lists, nil)
	}
	for i := range e {
		if int(e[i].Frames) >= len(tb.Stacks) {
			r.t.Errorf("list %d: stack %d beyond the %d handed over", list, e[i].Frames, len(tb.Stacks))
		}
	}
	r.lists[list] = append(r.lists[list], e...) // e is reused: copied
	r.batches++
}

// A decode with Options.Trace hands the sink every trace entry, list by
// list in trace order, as DecodeFile puts them in DeviceTraces (at every
// pipeline size, down to one-entry batches); TraceLists maps devices to
// lists, the snapshot's traces are empty and the rest of it is the same;
// errors are DecodeFile's.
func TestTraceSinkSameTraces(t *testing.T) {
	files := foldFixtures(t) // bad_*.pickle included
	for _, size := range foldSizes {
		withFoldSizes(t, size[0], size[1])
		old := sinkBatchLen
		sinkBatchLen = min(size[0], old)
		t.Cleanup(func() { sinkBatchLen = old })
		for _, p := range files {
			want, werr := DecodeFile(p, Options{})
			sink := &recordSink{t: t}
			got, err := DecodeFile(p, Options{Trace: sink})
			if werr != nil || err != nil {
				if werr == nil || err == nil || werr.Error() != err.Error() {
					t.Fatalf("%s: error %v, want %v", p, err, werr)
				}
				continue
			}
			ws := want.Snapshot
			if len(got.TraceLists) != len(ws.DeviceTraces) {
				t.Fatalf("%s: %d trace lists for %d devices", p, len(got.TraceLists), len(ws.DeviceTraces))
			}
			for dev, tr := range ws.DeviceTraces {
				l := got.TraceLists[dev]
				var streamed []snapshot.TraceEntry
				if l >= 0 {
					streamed = sink.lists[l]
				}
				if len(got.Snapshot.DeviceTraces[dev]) != 0 || !slices.Equal(streamed, tr) {
					t.Fatalf("%s device %d (list %d), batches %d×%d: %d entries streamed, want %d", p, dev, l, size[1], size[0], len(streamed), len(tr))
				}
			}
			gs := *got.Snapshot
			gs.DeviceTraces = ws.DeviceTraces
			if !reflect.DeepEqual(&gs, ws) || got.Schema != want.Schema {
				t.Fatalf("%s: the snapshot besides its traces differs", p)
			}
		}
	}
}
