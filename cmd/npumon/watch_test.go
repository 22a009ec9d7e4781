package main

import (
	"bufio"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/monitor/workload"
)

// TestWatchExisting: a directory a finished job left behind — snapshots
// and profiler directories — lists in arrival order and opens the newest.
func TestWatchExisting(t *testing.T) {
	dir := t.TempDir()
	w := finishedWorkload(t, workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3})
	code, out, errOut := captureRun(t, "watch", dir, "--list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var snaps, profs int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var c capture.Entry
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

	var s watchSummaryJSON
	runJSON(t, &s, "watch", dir, "--headless", "300ms") // the window counts from the newest capture being open
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
	w := finishedWorkload(t, workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: 3, NoProfile: true})
	for _, sel := range []string{"1", "snapshot_" + strconv.Itoa(w.Config().PID) + "_step000002.pickle"} {
		var s watchSummaryJSON
		runJSON(t, &s, "watch", dir, "--open", sel, "--headless", "500ms")
		if !strings.HasSuffix(s.Open, "_step000002.pickle") || s.Entries == 0 {
			t.Errorf("--open %s: open %q entries %d errors %v", sel, s.Open, s.Entries, s.Errors)
		}
	}
	code, out, _ := captureRun(t, "watch", dir, "--open", "9", "--headless", "500ms")
	if code != 0 || !strings.Contains(out, "--open 9: no such snapshot") {
		t.Errorf("missing capture: exit %d, %s", code, out)
	}
}
