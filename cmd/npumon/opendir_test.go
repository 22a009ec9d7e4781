package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/classify"
)

// TestReplayRankOneOpensItsDevice: the profiler output of rank 1 (device 1
// only) opens on its device without --device; naming another is refused.
func TestReplayRankOneOpensItsDevice(t *testing.T) {
	dir := fixture.Path(t, "ascend_profiler/msinsight_rank1")
	s := headlessSummary(t, "--headless", "1ms", dir)
	if s.Device != 1 || s.Entries == 0 {
		t.Fatalf("summary %+v", s)
	}
	if code, _, errOut := captureRun(t, "replay", "--headless", "1ms", "--device", "0", dir); code != 2 ||
		!strings.Contains(errOut, "--device 0: the input has device(s) [1]") {
		t.Fatalf("--device 0: exit %d %q", code, errOut)
	}
}

// TestReplayJobDir: a directory `demo --out` wrote opens its newest snapshot
// with every profiler run of its process; a run of another process beside
// them is left out and said so; holders and explain take the directory too,
// and --profiler DIR reads the same runs.
func TestReplayJobDir(t *testing.T) {
	files := demoOut(t, "--steps", "30", "--snapshot-every", "10")
	dir := filepath.Dir(files[0])
	runs, _ := filepath.Glob(filepath.Join(dir, "*_ascend_pt"))
	if len(runs) < 2 {
		t.Fatalf("the demo wrote %d profiler runs", len(runs))
	}
	pid, ok := classify.PID(files[0])
	if !ok {
		t.Fatalf("%s carries no pid", files[0])
	}
	// a run of another process (same files, another pid in its name)
	other := filepath.Join(dir, "otherhost_3_20200101000000000_ascend_pt")
	if out, err := exec.Command("cp", "-r", runs[0], other).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	var s replayJobJSON
	runJSON(t, &s, "replay", "--headless", "1ms", dir)
	newest := files[len(files)-1] // snapshot_{pid}_step{N}: the last step is the newest
	if s.Open != newest || !slices.Equal(s.Profiler, runs) || s.Ops == 0 || s.Entries == 0 ||
		!strings.Contains(s.Why, "1 of "+itoa(len(runs)+1)+" profiler runs are of other processes") {
		t.Fatalf("replay %s (pid %d): open %s, runs %v, ops %d, note %q", dir, pid, s.Open, s.Profiler, s.Ops, s.Why)
	}

	// holders DIR == holders NEWEST --profiler DIR (the runs of its process)
	_, viaDir, _ := captureRun(t, "holders", dir, "--by", "op", "--at", "end", "--json")
	_, viaFlag, _ := captureRun(t, "holders", newest, "--profiler", dir, "--by", "op", "--at", "end", "--json")
	var h map[string]any
	if err := json.Unmarshal([]byte(viaDir), &h); err != nil || viaDir != viaFlag {
		t.Fatalf("holders DIR and holders FILE --profiler DIR differ (%v):\n%s\n%s", err, viaDir, viaFlag)
	}
	var e struct {
		File string `json:"file"`
	}
	runJSON(t, &e, "explain", dir, "--no-whatif", "--json")

	// --profiler of a directory without the file's process is refused
	lone := t.TempDir()
	if out, err := exec.Command("cp", "-r", other, lone).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if code, _, errOut := captureRun(t, "holders", newest, "--profiler", lone); code == 0 ||
		!strings.Contains(errOut, "no profiler run of process "+itoa(pid)) {
		t.Fatalf("--profiler %s: exit %d %q", lone, code, errOut)
	}
	// a directory of runs only: stats and replay read its newest run;
	// holders says it has no snapshot
	os.RemoveAll(other)
	for _, f := range files {
		os.Remove(f)
	}
	if code, _, errOut := captureRun(t, "holders", dir); code == 0 || !strings.Contains(errOut, "no snapshot file in it") {
		t.Fatalf("holders on runs only: exit %d %q", code, errOut)
	}
	runJSON(t, &s, "replay", "--headless", "1ms", dir)
	if s.Open != runs[len(runs)-1] {
		t.Fatalf("runs only: open %s", s.Open)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
