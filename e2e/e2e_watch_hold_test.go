//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchHoldInTmux: in a directory that already holds dumps, watch opens
// the newest by modification time (not by name); pausing holds it while a
// new dump lands (the header counts it), and f opens the new one.
func TestWatchHoldInTmux(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i, f := range []struct{ src, name string }{
		{"cuda-2.0-flexgen-1.3b_snapshot.pickle", "z_older.pickle"},
		{"cuda-2.0-flexgen-oom_snapshot.pickle", "a_newer.pickle"},
	} {
		b, err := os.ReadFile(snapshotFixture(t, f.src))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, f.name)
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		os.Chtimes(dst, mt, mt)
	}
	p := startTmux(t, 160, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "watch", dir)
	p.waitFor("[1 Timeline]", "a_newer.pickle (2 of 2)")

	p.send("Space") // pause: working in the view holds the capture
	p.waitFor("PAUSED")
	b, err := os.ReadFile(snapshotFixture(t, "cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fresh.pickle"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	p.waitFor("1 new capture (f follows)", "a_newer.pickle (2 of 3)")

	p.send("f")
	p.waitFor("fresh.pickle (3 of 3)")
	p.waitGone("new capture")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
