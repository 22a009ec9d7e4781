//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSimOutWatch: watch picks up the snapshots and profiler directories a
// running sim writes after it started, opens the newest snapshot and reads
// the profiler's ops while they are written.
func TestSimOutWatch(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	// a job of 20 steps paced at 10/s (2 s: ten snapshots, four profiler
	// directories, so that watch may take over a second to start and still
	// see two snapshots and a profiler directory arrive) that ends well
	// inside watch's window, so that the summary is of a directory nothing
	// writes to any more: a job still writing when the window ends leaves
	// its newest snapshot listed and not yet opened. A step's work takes a
	// few ms of the 100 ms it is paced to: the window allows for a machine
	// many times slower.
	startSim(t, bin, "--listen", "unix:"+filepath.Join(t.TempDir(), "s.sock"), "--out", dir,
		"--snapshot-every", "2", "--layers", "2", "--device-mem", "16GiB", "--rate", "10", "--steps", "20")
	var s liveSummary
	runJSON(t, bin, &s, "watch", dir, "--headless", "12s")
	var snaps, profs int
	for _, c := range s.Captures {
		if c.Existing {
			continue
		}
		switch c.Kind {
		case "snapshot":
			snaps++
		case "profiler":
			profs++
		}
	}
	if snaps < 2 || profs < 1 {
		t.Fatalf("new captures: %d snapshots, %d profiler dirs: %+v", snaps, profs, s.Captures)
	}
	last := ""
	for _, c := range s.Captures {
		if c.Kind == "snapshot" {
			last = c.Path
		}
	}
	if s.Open != last || !strings.Contains(s.Open, "snapshot_") || s.Entries == 0 || s.Ops == 0 || len(s.Errors) != 0 {
		t.Fatalf("open %q (newest %q), entries %d, ops %d, errors %v", s.Open, last, s.Entries, s.Ops, s.Errors)
	}
}

// TestWatchPickerInTmux: npumon watch in tmux over a directory of real
// snapshots: the header names the open capture, c shows the picker, a dump
// landing meanwhile appears in it (and, following, is opened), and enter
// on the first capture switches to it.
func TestWatchPickerInTmux(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	for i, name := range []string{"cuda-2.0-flexgen-1.3b_snapshot.pickle", "cuda-2.0-flexgen-oom_snapshot.pickle"} {
		b, err := os.ReadFile(snapshotFixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, fmt.Sprintf("%d_%s", i+1, name))
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Now().Add(time.Duration(i-2) * time.Minute)
		os.Chtimes(dst, mt, mt)
	}
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "watch", dir)
	p.waitFor("[1 Timeline]", ".pickle (2 of 2)", "c captures")

	p.send("c")
	p.waitFor("Captures in "+dir, "1_cuda-2.0-flexgen-1.3b_snapshot.pickle", "2_cuda-2.0-flexgen-oom_snapshot.pickle", "(open)")

	b, err := os.ReadFile(snapshotFixture(t, "cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "3_assignment2.pickle"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor("3_assignment2.pickle", "3_assignment2.pickle (3 of 3)") // listed live, and opened (--follow)

	p.send("g", "Enter")
	p.waitGone("Captures in")
	screen := p.waitFor(".pickle (1 of 3)", "[1 Timeline]")
	if strings.Contains(screen, "connected") {
		t.Errorf("header still says connected:\n%s", screen)
	}
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
