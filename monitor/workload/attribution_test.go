package workload

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/attach"
	"github.com/npumon/npumon/monitor/store"
)

// TestOOMAttribution runs the oom scenario as `npumon demo --scenario oom`
// does (ops and allocator events into one live Store) and checks that the
// oom entry, and the segment releases of its retry path, belong to
// aten::cat (docs/timeline.md "Op attribution": inclusive ends) and that
// the oom entry carries the failing request's stack (KVCache.append).
func TestOOMAttribution(t *testing.T) {
	st := store.New(store.Options{})
	w, err := New(Config{Scenario: OOM, Seed: 1, Layers: 2, DeviceMem: 2 << 30, Steps: 12, Start: start,
		OnOp: func(o store.Op) { st.AppendOps([]store.Op{o}) }})
	if err != nil {
		t.Fatal(err)
	}
	detach, err := attach.Store(st, []*allocator.Allocator{w.Allocator()},
		attach.Options{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	detach()
	n := st.Len(0)
	evs := st.Events(0, -1<<62, 1<<62, int(n))
	if int64(len(evs)) != n || n == 0 {
		t.Fatalf("%d events of %d", len(evs), n)
	}
	ooms := 0
	for i, e := range evs {
		if e.Action != snapshot.ActionOOM {
			continue
		}
		ooms++
		op, ok := st.OpAt(e.Time)
		if !ok || op.Name != "aten::cat" {
			t.Errorf("oom entry %d at %d µs: op %q (found %v), want aten::cat", e.Seq, e.Time, op.Name, ok)
		}
		frames := st.Stack(e.Frames)
		if !slices.ContainsFunc(frames, func(f snapshot.Frame) bool { return f.Name == "KVCache.append" }) {
			t.Errorf("oom entry %d: frames %v, want KVCache.append", e.Seq, frames)
		}
		// the retry path: segment releases right before the oom entry
		for j := i - 1; j >= 0 && evs[j].Action == snapshot.ActionSegmentFree; j-- {
			if op, ok := st.OpAt(evs[j].Time); !ok || op.Name != "aten::cat" {
				t.Errorf("retry-path segment_free %d: op %q, want aten::cat", evs[j].Seq, op.Name)
			}
		}
	}
	if ooms == 0 {
		t.Fatal("the oom scenario recorded no oom entry")
	}
}
