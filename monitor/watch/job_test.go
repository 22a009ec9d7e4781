package watch_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// TestLoadJob: a job's dump directory loads its newest snapshot's memory
// data with every run's ops — the ops watch reads from the same directory —
// and the picker lists every capture, opening an older snapshot's memory
// data with the ops kept.
func TestLoadJob(t *testing.T) {
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	j, err := classify.ResolveJob(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(j.Snapshot, "_step000005.pickle") || !slices.Equal(j.Runs, w.ProfilerDirs()) || j.Why != "" {
		t.Fatalf("resolved %+v (runs written %v)", j, w.ProfilerDirs())
	}
	st := store.New(store.Options{})
	l, err := watch.LoadJob(context.Background(), j, st, watch.LoadOptions{})
	if err != nil || l.Capture == nil {
		t.Fatalf("LoadJob: %v", err)
	}
	ops, _, _ := st.OpsSince(0)
	var want int
	for _, r := range j.Runs {
		d, err := profiler.ReadDir(r)
		if err != nil {
			t.Fatal(err)
		}
		want += len(watch.RunOps(d))
	}
	newest := st.Len(0)
	if len(ops) != want || want == 0 || newest == 0 {
		t.Fatalf("%d ops (the runs hold %d), %d entries", len(ops), want, newest)
	}

	c := watch.NewJobCaptures(j, st, watch.LoadOptions{})
	var opened *replay.Capture
	c.OnOpen = func(o *replay.Capture) { opened = o }
	list := c.List()
	if len(list) != 2+len(j.Runs) || !list[len(list)-1].Open || list[len(list)-1].Path != j.Snapshot {
		t.Fatalf("list %+v", list)
	}
	if err := c.Open(j.Snapshots[0]); err != nil {
		t.Fatal(err)
	}
	after, _, _ := st.OpsSince(0)
	if st.Len(0) >= newest || len(after) != want || c.List()[openOf(c.List())].Path != j.Snapshots[0] {
		t.Fatalf("after opening the older snapshot: %d entries (newest %d), %d ops", st.Len(0), newest, len(after))
	}
	// what works on the open snapshot (the what-if view) gets the one opened, trace whole
	if opened == nil || opened.Path != j.Snapshots[0] || len(opened.Snapshot.DeviceTraces) == 0 || len(opened.Snapshot.DeviceTraces[0]) == 0 {
		t.Fatalf("OnOpen got %+v", opened)
	}
	if err := c.Open(dir + "/missing.pickle"); err == nil {
		t.Error("opened a path that is not a capture")
	}
	bad := j.Snapshots[0]
	os.WriteFile(bad, []byte("\x80\x04garbage"), 0o644)
	if err := c.Open(bad); err == nil || c.List()[0].Error == "" && c.List()[1].Error == "" {
		t.Errorf("a broken capture opened, or its error is not listed: %v", err)
	}
}
