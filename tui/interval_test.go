package tui

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// TestIntervalOpAgrees: an oom entry whose recovered time is only an
// interval (docs/timerecovery.md) is attributed to the op that began
// inside it (oprange.Interval) — by the header standing on it, the OOM
// panel and the event list alike — not to the op at its lower bound.
func TestIntervalOpAgrees(t *testing.T) {
	seg := snapshot.Segment{Device: 0, Address: 0x1000, TotalSize: 4096, Blocks: []snapshot.Block{
		{Address: 0x1000, Size: 512, RequestedSize: 512, State: snapshot.StateActiveAllocated},
		{Address: 0x1200, Size: 512, RequestedSize: 512, State: snapshot.StateActiveAllocated},
		{Address: 0x1400, Size: 3072},
	}}
	snap := &snapshot.Snapshot{Segments: []snapshot.Segment{seg}, DeviceTraces: [][]snapshot.TraceEntry{{
		{Action: snapshot.ActionSegmentAlloc, Addr: 0x1000, Size: 4096, TimeUS: 1_700_000_000_000_100},
		{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: 512, TimeUS: 1_700_000_000_000_100},
		{Action: snapshot.ActionOOM, Addr: 1 << 20, Size: 1 << 30, TimeUS: 1_700_000_000_000_100}, // in (…100, …300)
		{Action: snapshot.ActionAlloc, Addr: 0x1200, Size: 512, TimeUS: 1_700_000_000_000_300},
	}}, TimeExact: [][]bool{{false, true, false, true}}}
	const t0 = 1_700_000_000_000_000
	st := storeOf(t, snap, []store.Op{
		{Name: "aten::add", StartUS: t0 + 90, EndUS: t0 + 110, Seq: -1, Step: -1},
		{Name: "aten::cat", StartUS: t0 + 150, EndUS: t0 + 250, Seq: -1, Step: -1},
	})
	m := newSized(t, testOptions(st), 160, 40)
	press(m, "g", "o")
	if len(m.vw.x.views) != 1 || m.vw.x.views[0].oom == nil {
		t.Fatal("no OOM panel")
	}
	if got := m.vw.x.views[0].oom.op; got != "aten::cat" {
		t.Errorf("OOM panel op %q, want aten::cat", got)
	}
	if !m.at.hasOpAt || m.at.opAt.Name != "aten::cat" {
		t.Errorf("header op %q (%v), want aten::cat", m.at.opAt.Name, m.at.hasOpAt)
	}
	if v := m.View(); !strings.Contains(v, "op aten::cat") {
		t.Errorf("header does not name aten::cat:\n%s", v)
	}
	// one step back the cursor stands after the exact alloc: its own op
	press(m, "esc", "left")
	if m.at.opAt.Name != "aten::add" {
		t.Errorf("after the alloc: header op %q, want aten::add", m.at.opAt.Name)
	}
}
