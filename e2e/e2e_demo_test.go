//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

var entryRe = regexp.MustCompile(`entry #(?:\d+|–)/(\d+)`)

func entries(t *testing.T, screen string) int {
	t.Helper()
	m := entryRe.FindStringSubmatch(screen)
	if m == nil {
		t.Fatalf("no entry counter on screen:\n%s", screen)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestDemoInTmux: `npumon demo` at 120×40 shows every pane with moving
// data, and answers keys: space pauses the live view, f follows again, ?
// opens the help, q quits with status 0.
func TestDemoInTmux(t *testing.T) {
	bin := npumonBin(t)
	t0 := time.Now()
	p := startTmux(t, 120, 40, []string{"NO_COLOR=1", "TZ=UTC"}, bin, "demo")
	screen := p.waitFor("[1 Timeline]", "2 Segments", "3 Events", "4 Ops", "LIVE", "aten::", "segments", "HBM")
	// The target is 2 s. How long it takes on this machine is logged, not
	// asserted: a CI machine may be many times slower (waitFor bounds a hang).
	t.Logf("all panes with data after %v (target 2 s)", time.Since(t0).Round(time.Millisecond))
	n0 := entries(t, screen)
	deadline := time.Now().Add(waitLimit)
	for entries(t, p.capture()) <= n0 {
		if time.Now().After(deadline) {
			t.Fatalf("data not moving: still %d entries", n0)
		}
		time.Sleep(100 * time.Millisecond)
	}

	p.send("Space")
	p.waitFor("PAUSED")
	p.send("f")
	p.waitFor("LIVE")
	p.send("?")
	p.waitFor("npumon keys")
	p.send("Escape")
	p.send("2")
	p.waitFor("[2 Segments]")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestDemoFilesDecode: what `demo --out` writes — periodic snapshots and an
// OOM snapshot named like torch_npu's — decodes with `npumon stats` and
// with Python's own pickle, whose trace entries carry time_us.
func TestDemoFilesDecode(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	var s liveSummary
	// 40 steps (2 s at this rate) and the summary when they are done: the
	// files do not depend on how fast the machine is; the 2 minutes only
	// bound a job that never ends
	runJSON(t, bin, &s, "demo", "--headless", "2m", "--steps", "40", "--scenario", "oom", "--device-mem", "8GiB", "--layers", "2",
		"--rate", "20", "--snapshot-every", "5", "--out", dir)
	if s.OOMs == 0 {
		t.Fatalf("no OOM in the oom scenario: %+v", s)
	}
	oomRe := regexp.MustCompile(`^oom_snapshot_\d+_\d{14}\.pickle$`)
	var snaps, ooms []string
	profDirs := 0
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		switch {
		case oomRe.MatchString(e.Name()):
			ooms = append(ooms, filepath.Join(dir, e.Name()))
		case strings.HasPrefix(e.Name(), "snapshot_") && strings.HasSuffix(e.Name(), ".pickle"):
			snaps = append(snaps, filepath.Join(dir, e.Name()))
		case strings.HasSuffix(e.Name(), "_ascend_pt"):
			profDirs++
		}
	}
	if len(snaps) == 0 || len(ooms) == 0 || profDirs == 0 {
		t.Fatalf("wrote %d snapshots, %d OOM snapshots, %d profiler dirs: %v", len(snaps), len(ooms), profDirs, ents)
	}
	files := append(snaps, ooms...)
	for _, f := range files {
		if out, err := exec.Command(bin, "stats", f).CombinedOutput(); err != nil {
			t.Errorf("npumon stats %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
	py := fixture.Tool(t, "python3", "python3")
	script := `
import pickle, sys
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        s = pickle.load(f)
    assert isinstance(s, dict) and s["segments"], path
    trace = s["device_traces"][0]
    assert trace, path
    for e in trace:
        assert isinstance(e["time_us"], int) and e["time_us"] > 1_600_000_000_000_000, (path, e)
    if "oom_snapshot_" in path:
        assert any(e["action"] == "oom" for e in trace), path
print("ok", len(sys.argv) - 1)
`
	out, err := exec.Command(py, append([]string{"-c", script}, files...)...).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok ") {
		t.Fatalf("python pickle: %v\n%s", err, out)
	}
}
