package watch_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/monitor/workload"
)

// TestDirSourcePicker: the picker's list (DirSource as tui.Captures) holds
// every capture in arrival order with time and size, marks the open one,
// and opening an older snapshot shows it and stops following; opening the
// newest again follows again.
func TestDirSourcePicker(t *testing.T) {
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	var list []capture.Entry
	poll.Until(t, "the newest snapshot to open", func() bool {
		list = wd.List()
		open := openOf(list)
		return open >= 0 && strings.HasSuffix(list[open].Path, "_step000005.pickle")
	})
	var snaps []int
	for i, c := range list {
		if c.Size <= 0 || c.Arrived.IsZero() || c.Error != "" {
			t.Errorf("capture %+v", c)
		}
		if c.Kind == "snapshot" {
			snaps = append(snaps, i)
		}
	}
	if len(snaps) != 2 || len(list) != 2+len(w.ProfilerDirs()) {
		t.Fatalf("list %+v", list)
	}
	newest := st.Len(0)
	older := list[snaps[0]].Path
	if err := wd.Open(older); err != nil {
		t.Fatal(err)
	}
	list = wd.List()
	if openOf(list) != snaps[0] || wd.Following() || st.Len(0) >= newest {
		t.Fatalf("after opening %s: open %d, following %v, %d entries (newest had %d)", older, openOf(list), wd.Following(), st.Len(0), newest)
	}
	if err := wd.Open(list[snaps[1]].Path); err != nil || !wd.Following() || st.Len(0) != newest {
		t.Fatalf("reopening the newest: %v, following %v, %d entries", err, wd.Following(), st.Len(0))
	}
	if err := wd.Open(filepath.Join(dir, "nope.pickle")); err == nil || !strings.Contains(err.Error(), "not a capture") {
		t.Fatalf("unknown capture: %v", err)
	}
	// a profiler directory's memory records (kept in FRAMEWORK/ after
	// analysis) become the memory data; one whose raw memory records are
	// gone cannot be: a clear error, noted in the list, and the open
	// capture stays
	prof := -1
	for i, c := range list {
		if c.Kind == "profiler" {
			prof = i
		}
	}
	if prof < 0 {
		t.Fatalf("no profiler directory in %+v", list)
	}
	path := list[prof].Path
	if err := wd.Open(path); err != nil {
		t.Fatal(err)
	}
	if l := wd.List(); openOf(l) != prof || wd.Following() || st.Len(0) == 0 || st.Len(0) == newest {
		t.Fatalf("after opening %s: open %d, following %v, %d entries", path, openOf(l), wd.Following(), st.Len(0))
	}
	if err := wd.Open(list[snaps[1]].Path); err != nil || st.Len(0) != newest {
		t.Fatalf("reopening the newest: %v, %d entries", err, st.Len(0))
	}
	if err := os.Remove(filepath.Join(path, "FRAMEWORK", "torch.memory_usage")); err != nil {
		t.Fatal(err)
	}
	// without raw records the analysed memory_record totals are the data
	if err := wd.Open(path); err != nil || st.Len(0) == 0 || st.Len(0) == newest {
		t.Fatalf("open %s with analysed totals only: %v, %d entries", path, err, st.Len(0))
	}
	if err := os.Remove(filepath.Join(path, "ASCEND_PROFILER_OUTPUT", "memory_record.csv")); err != nil {
		t.Fatal(err)
	}
	if err := wd.Open(list[snaps[1]].Path); err != nil {
		t.Fatal(err)
	}
	err = wd.Open(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no memory records") {
		t.Fatalf("open %s without any memory records: %v", path, err)
	}
	if l := wd.List(); openOf(l) != snaps[1] || l[prof].Error == "" || st.Len(0) != newest {
		t.Fatalf("after a failed open: %+v", l)
	}
}

func openOf(list []capture.Entry) int {
	for i, c := range list {
		if c.Open {
			return i
		}
	}
	return -1
}

// TestDirSourcePick: ScanDir lists what a finished job left, oldest first
// and numbered; DirOptions.Pick by that number opens it and does not follow.
func TestDirSourcePick(t *testing.T) {
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3, NoProfile: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var scanned []capture.Entry
	if err := watch.ScanDir(dir, func(c capture.Entry) error { scanned = append(scanned, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(scanned) != 2 || scanned[0].Index != 1 || scanned[1].Index != 2 || !scanned[0].Existing ||
		scanned[0].Kind != capture.Snapshot || !strings.HasSuffix(scanned[0].Path, "_step000002.pickle") ||
		scanned[0].Arrived.After(scanned[1].Arrived) || scanned[0].Size <= 0 {
		t.Fatalf("scanned %+v", scanned)
	}
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true, Pick: "1"})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	poll.Until(t, "a capture to open", func() bool { return wd.Current() != "" })
	if wd.Current() != scanned[0].Path || wd.Following() || len(wd.Errors()) != 0 || st.Len(0) == 0 {
		t.Fatalf("open %q following %v errors %v", wd.Current(), wd.Following(), wd.Errors())
	}
}

// TestDirSourceMemUsage: the memUsageInfo CSV beside the open snapshot is
// paired with it (device, nearest stamp), a nearer one landing later
// replaces it, and a CSV that does not parse is a note, never a capture.
func TestDirSourceMemUsage(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("../../replay/testdata/cuda21_p4.pickle")
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "oom_snapshot_7526_20261201103015.pickle")
	os.WriteFile(snap, b, 0o644)
	row := func(mb int) []byte {
		return []byte(fmt.Sprintf("moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,%d,%d\n", mb, mb))
	}
	os.WriteFile(filepath.Join(dir, "device_0_memUsageInfo_20261201103025.csv"), row(100), 0o644)
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	<-wd.Ready()
	cur := func() int64 {
		var n int64
		for _, f := range wd.MemUsage() {
			if f.Device == 0 {
				n = f.Total()
			}
		}
		return n
	}
	if wd.Current() != snap || cur() != 100<<20 {
		t.Fatalf("open %q, device 0 outside %d", wd.Current(), cur())
	}
	os.WriteFile(filepath.Join(dir, "device_0_memUsageInfo_20261201103016.csv"), row(200), 0o644)
	poll.Until(t, "the nearer CSV", func() bool { return cur() == 200<<20 })
	os.WriteFile(filepath.Join(dir, "device_1_memUsageInfo_20261201103016.csv"), []byte("nonsense\n"), 0o644)
	poll.Until(t, "the bad CSV's note", func() bool {
		for _, e := range wd.Errors() {
			if strings.Contains(e, "device_1_memUsageInfo_20261201103016.csv: line 1: the header is") {
				return true
			}
		}
		return false
	})
	for _, c := range wd.List() {
		if strings.HasSuffix(c.Path, ".csv") {
			t.Errorf("a CSV listed as a capture: %+v", c)
		}
	}
}
