package store

import (
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// TestOpOfInterval: an entry whose recovered time is only an interval
// (Snapshot.TimeExact false) is attributed by oprange.Interval — the op
// that begins inside its interval — not at its lower bound, where OpAt
// still answers; exact entries keep OpAt's op.
func TestOpOfInterval(t *testing.T) {
	seg := snapshot.Segment{Device: 0, Address: 0x1000, TotalSize: 4096, Blocks: []snapshot.Block{
		{Address: 0x1000, Size: 512, RequestedSize: 512, State: snapshot.StateActiveAllocated},
		{Address: 0x1200, Size: 512, RequestedSize: 512, State: snapshot.StateActiveAllocated},
		{Address: 0x1400, Size: 3072},
	}}
	snap := &snapshot.Snapshot{Segments: []snapshot.Segment{seg}, DeviceTraces: [][]snapshot.TraceEntry{{
		{Action: snapshot.ActionSegmentAlloc, Addr: 0x1000, Size: 4096, TimeUS: 100}, // in [100, 100]: no op begins inside
		{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: 512, TimeUS: 100},
		{Action: snapshot.ActionOOM, Addr: 0, Size: 1 << 30, TimeUS: 100}, // recovered: in (100, 300), aten::cat began there
		{Action: snapshot.ActionAlloc, Addr: 0x1200, Size: 512, TimeUS: 300},
	}}, TimeExact: [][]bool{{false, true, false, true}}}
	st := New(Options{})
	if err := st.IngestSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	st.IngestOps([]Op{
		{Name: "ProfilerStep#1", StartUS: 0, EndUS: 1000, IsStep: true},
		{Name: "aten::add", StartUS: 90, EndUS: 110},
		{Name: "aten::cat", StartUS: 150, EndUS: 250},
	})
	evs := st.EventsAroundSeq(0, 0, 0, 4)
	if len(evs) != 4 {
		t.Fatalf("%d events", len(evs))
	}
	want := []struct {
		interval bool
		hi       int64
		op       string
	}{{true, 100, "aten::add"}, {false, 0, "aten::add"}, {true, 300, "aten::cat"}, {false, 0, ""}}
	for i, e := range evs {
		op, ok := st.OpOf(e)
		if e.Interval != want[i].interval || e.Interval && e.TimeHi != want[i].hi || op.Name != want[i].op || ok != (want[i].op != "") {
			t.Errorf("entry %d: interval %v hi %d op %q %v, want %+v", i, e.Interval, e.TimeHi, op.Name, ok, want[i])
		}
	}
	if op, _ := st.OpAt(evs[2].Time); op.Name != "aten::add" {
		t.Errorf("OpAt(%d) = %q, want the op at the lower bound", evs[2].Time, op.Name)
	}
}
