package main

import (
	"bufio"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/tui"
)

// TestWatchExisting: a directory a finished job left behind — snapshots
// and profiler directories — lists in arrival order and opens the newest.
func TestWatchExisting(t *testing.T) {
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := captureRun(t, "watch", dir, "--list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var snaps, profs int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var c capture
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if !c.Existing {
			t.Errorf("%+v not existing", c)
		}
		switch c.Kind {
		case "snapshot":
			snaps++
		case "profiler":
			profs++
		}
	}
	if snaps != 2 || profs != len(w.ProfilerDirs()) || profs == 0 {
		t.Fatalf("listed %d snapshots, %d profiler dirs:\n%s", snaps, profs, out)
	}

	code, out, errOut = captureRun(t, "watch", dir, "--headless", "700ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s watchSummaryJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(s.Open, "_step000005.pickle") || s.Entries == 0 || s.Ops == 0 || len(s.Errors) != 0 {
		t.Fatalf("summary open %q entries %d ops %d errors %v", s.Open, s.Entries, s.Ops, s.Errors)
	}
}

func TestWatchNotADirectory(t *testing.T) {
	code, _, errOut := captureRun(t, "watch", "watch_test.go")
	if code != exitUsage || !strings.Contains(errOut, "not a directory") {
		t.Fatalf("exit %d, %q", code, errOut)
	}
}

// TestWatchOpen: --open picks a capture by its --list index or file name.
func TestWatchOpen(t *testing.T) {
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3, NoProfile: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, sel := range []string{"1", "snapshot_" + strconv.Itoa(w.Config().PID) + "_step000002.pickle"} {
		code, out, errOut := captureRun(t, "watch", dir, "--open", sel, "--headless", "500ms")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var s watchSummaryJSON
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(s.Open, "_step000002.pickle") || s.Entries == 0 {
			t.Errorf("--open %s: open %q entries %d errors %v", sel, s.Open, s.Entries, s.Errors)
		}
	}
	code, out, _ := captureRun(t, "watch", dir, "--open", "9", "--headless", "500ms")
	if code != 0 || !strings.Contains(out, "--open 9: no such snapshot") {
		t.Errorf("missing capture: exit %d, %s", code, out)
	}
}

// TestWatchPickerList: the picker's list (dirWatch as tui.Captures) holds
// every capture in arrival order with time and size, marks the open one,
// and opening an older snapshot shows it and stops following; opening the
// newest again follows again.
func TestWatchPickerList(t *testing.T) {
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	store := monitor.NewStore(monitor.StoreOptions{})
	wd := &dirWatch{dir: dir, store: store, follow: true, auto: true}
	if err := wd.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.stop()
	var list []tui.Capture
	deadline := time.Now().Add(5 * time.Second)
	for {
		list = wd.List()
		if open := openOf(list); open >= 0 && strings.HasSuffix(list[open].Path, "_step000005.pickle") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("newest snapshot never opened: %+v", list)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var snaps []int
	for i, c := range list {
		if c.Size <= 0 || c.Arrived.IsZero() || c.Err != "" {
			t.Errorf("capture %+v", c)
		}
		if c.Kind == "snapshot" {
			snaps = append(snaps, i)
		}
	}
	if len(snaps) != 2 || len(list) != 2+len(w.ProfilerDirs()) {
		t.Fatalf("list %+v", list)
	}
	newest := store.Len(0)
	older := list[snaps[0]].Path
	if err := wd.Open(older); err != nil {
		t.Fatal(err)
	}
	list = wd.List()
	if openOf(list) != snaps[0] || wd.following() || store.Len(0) >= newest {
		t.Fatalf("after opening %s: open %d, following %v, %d entries (newest had %d)", older, openOf(list), wd.following(), store.Len(0), newest)
	}
	if err := wd.Open(list[snaps[1]].Path); err != nil || !wd.following() || store.Len(0) != newest {
		t.Fatalf("reopening the newest: %v, following %v, %d entries", err, wd.following(), store.Len(0))
	}
	if err := wd.Open(filepath.Join(dir, "nope.pickle")); err == nil || !strings.Contains(err.Error(), "not a capture") {
		t.Fatalf("unknown capture: %v", err)
	}
	// a profiler directory without memory records (the workload records
	// none with addresses) cannot be the memory data: a clear error, noted
	// in the list, and the open capture stays
	for i, c := range list {
		if c.Kind != "profiler" {
			continue
		}
		err := wd.Open(c.Path)
		if err == nil || !strings.Contains(err.Error(), c.Path) || !strings.Contains(err.Error(), "no memory records") {
			t.Fatalf("open %s: %v", c.Path, err)
		}
		if l := wd.List(); openOf(l) != snaps[1] || l[i].Err == "" || store.Len(0) != newest {
			t.Fatalf("after a failed open: %+v", l)
		}
		break
	}
}

func openOf(list []tui.Capture) int {
	for i, c := range list {
		if c.Open {
			return i
		}
	}
	return -1
}
