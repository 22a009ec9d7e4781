//go:build e2e

package e2e

import (
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
	startSim(t, bin, "--listen", "unix:"+filepath.Join(t.TempDir(), "s.sock"), "--out", dir,
		"--snapshot-every", "2", "--layers", "2", "--device-mem", "16GiB", "--rate", "10")
	time.Sleep(200 * time.Millisecond)
	var s liveSummary
	runJSON(t, bin, &s, "watch", dir, "--headless", "3s")
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
