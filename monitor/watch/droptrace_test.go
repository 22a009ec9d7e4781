package watch

import (
	"context"
	"reflect"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

// A load with DropTrace leaves the capture without its traces and the same
// Store; WithTrace gives back the capture a plain load decodes.
func TestLoadDropTrace(t *testing.T) {
	path := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	plain, dropped := store.New(store.Options{}), store.New(store.Options{})
	lp, err := Load(context.Background(), path, plain, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ld, err := Load(context.Background(), path, dropped, LoadOptions{DropTrace: true})
	if err != nil {
		t.Fatal(err)
	}
	want := lp.Capture.Snapshot.DeviceTraces
	if len(want) == 0 || len(want[0]) == 0 {
		t.Fatal("the fixture has no trace")
	}
	for dev, tr := range ld.Capture.Snapshot.DeviceTraces {
		if tr != nil {
			t.Fatalf("device %d: %d entries still in the capture", dev, len(tr))
		}
	}
	full := WithTrace(ld.Capture, dropped)
	if full == ld.Capture || !reflect.DeepEqual(full.Snapshot.DeviceTraces, want) || !replay.SameModel(full.Snapshot, lp.Capture.Snapshot) {
		t.Fatal("WithTrace does not give back the decoded capture")
	}
	if ld.Capture.Snapshot.DeviceTraces[0] != nil {
		t.Fatal("WithTrace changed the capture it was given")
	}
	for _, dev := range plain.Devices() {
		n := plain.Len(dev)
		if a, b := plain.EventsAroundSeq(dev, 0, 0, int(n)), dropped.EventsAroundSeq(dev, 0, 0, int(n)); !reflect.DeepEqual(a, b) {
			t.Fatalf("device %d: events differ", dev)
		}
		for _, i := range []int64{0, n / 3, n / 2, n} {
			if a, b := plain.SummaryAtSeq(dev, i), dropped.SummaryAtSeq(dev, i); !reflect.DeepEqual(a, b) {
				t.Fatalf("device %d at %d: summary differs", dev, i)
			}
		}
	}
	if a, b := len(plain.Ops(-1<<62, 1<<62)), len(dropped.Ops(-1<<62, 1<<62)); a != b {
		t.Fatalf("ops %d, with DropTrace %d", a, b)
	}
	// a Store that did not take the traces gives nothing back
	if c := WithTrace(ld.Capture, plain); c != ld.Capture {
		t.Fatal("WithTrace filled traces from another Store")
	}
}
