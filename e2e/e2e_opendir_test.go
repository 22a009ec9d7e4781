//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestReplayRankOneInTmux: the profiler output of rank 1 of an 8-NPU job
// (device 1 only) opens on device 1 without --device.
func TestReplayRankOneInTmux(t *testing.T) {
	bin := npumonBin(t)
	dir := fixture.Path(t, "ascend_profiler/msinsight_rank1")
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", dir)
	p.waitFor("[1 Timeline]", "msinsight_rank1", "dev 1 (1 of 1)")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestReplayJobDirInTmux: replay on the directory `demo --out` wrote opens
// its newest snapshot with the ops of its profiler runs; c lists the other
// captures, and enter opens one.
func TestReplayJobDirInTmux(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	out, err := exec.Command(bin, "demo", "--out", dir, "--rate", "1000", "--layers", "2", "--steps", "30",
		"--snapshot-every", "10", "--headless", "2m").CombinedOutput()
	if err != nil {
		t.Fatalf("demo --out: %v\n%s", err, out)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshot_*_step*.pickle"))
	runs, _ := filepath.Glob(filepath.Join(dir, "*_ascend_pt"))
	if len(snaps) != 3 || len(runs) == 0 {
		t.Fatalf("demo wrote %d snapshots, %d runs", len(snaps), len(runs))
	}
	newest := filepath.Base(snaps[2]) // step000029
	p := startTmux(t, 160, 45, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", dir)
	p.waitFor("[1 Timeline]", newest, "c captures")
	p.send("4") // the op table: the runs' ops are there
	p.waitFor("[4 Ops]", "ProfilerStep#")
	p.send("c")
	p.waitFor("Captures in", filepath.Base(snaps[0]), filepath.Base(runs[0]), "(open)")
	p.send("g", "Enter") // the oldest capture
	p.waitGone("Captures in")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
