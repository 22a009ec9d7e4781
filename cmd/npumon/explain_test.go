package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/replay/whatif"
)

const leakFile = "../../replay/testdata/leak_steps.pickle"

func TestHoldersJSON(t *testing.T) {
	var h explain.Holders
	runJSON(t, &h, "holders", fixture2026(t), "--at", "peak", "--top", "3", "--json")
	if h.At.Index != 1402 || h.At.TimeUS == nil || h.By != "callsite" || len(h.Groups) != 3 || h.ActiveBytes != 13923997700 {
		t.Fatalf("holders = %+v", h)
	}
	for i, g := range h.Groups {
		if i > 0 && g.Bytes > h.Groups[i-1].Bytes {
			t.Errorf("groups not sorted by bytes: %+v", h.Groups)
		}
		if len(g.Frames) == 0 || strings.Contains(g.Key, "site-packages") {
			t.Errorf("group %q: a call site outside the libraries with frames expected", g.Key)
		}
	}
	// the raw keys the JSON promises
	_, out, _ := captureRun(t, "holders", npuFile, "--at", "oom", "--by", "stream", "--json")
	for _, k := range []string{`"path"`, `"device"`, `"at"`, `"index"`, `"time_us"`, `"by": "stream"`, `"allocated_bytes"`,
		`"groups"`, `"key"`, `"bytes"`, `"count"`, `"largest_bytes"`, `"frames"`, `"filename"`, `"line"`, `"name"`} {
		if !strings.Contains(out, k) {
			t.Errorf("holders --json lacks %s:\n%s", k, out)
		}
	}
	// the softmax frame is torch's (dist-packages); with no library paths it is the call site
	code, out, _ := captureRun(t, "holders", leakFile, "--at", "peak")
	if code != 0 || !strings.Contains(out, "Attention.forward (/job/model.py:58)") || strings.Contains(out, "softmax") {
		t.Errorf("default library paths: exit %d\n%s", code, out)
	}
	code, out, _ = captureRun(t, "holders", leakFile, "--at", "peak", "--library", "^$")
	if code != 0 || !strings.Contains(out, "softmax (/usr/lib/python3/dist-packages/torch/nn/functional.py:2140)") {
		t.Errorf("--library: exit %d\n%s", code, out)
	}
}

// The "(no stack)" group is said what it holds: on the 2026 dump those are
// the model's parameters, live before memory history was recorded.
func TestHoldersNoStackNote(t *testing.T) {
	code, out, _ := captureRun(t, "holders", fixture2026(t), "--at", "peak")
	if code != 0 || !strings.Contains(out, "(no stack): allocations recorded without a stack") ||
		!strings.Contains(out, "by category: parameter 997.77 MiB") {
		t.Errorf("holders: exit %d, no category note for (no stack):\n%s", code, out)
	}
	_, out, _ = captureRun(t, "holders", fixture2026(t), "--at", "peak", "--by", "op")
	if strings.Contains(out, "allocations recorded without a stack") {
		t.Errorf("--by op has no (no stack) group, yet the note is printed:\n%s", out)
	}
}

func TestHoldersErrors(t *testing.T) {
	for _, args := range [][]string{
		{"holders", leakFile, "--at", "oom:2"},
		{"holders", leakFile, "--at", "#99999"},
		{"holders", leakFile, "--at", "soon"},
		{"holders", leakFile, "--by", "colour"},
		{"holders", leakFile, "--library", "("},
		{"holders", npuFile, "--at", "1700000000000000"},
		{"holders", "../../replay/testdata/bad_truncated.pickle"},
		{"holders", leakFile, "--device", "3"},
		{"diff", leakFile, leakFile, "--from", "peak"},
	} {
		code, _, errOut := captureRun(t, args...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestDiffJSON(t *testing.T) {
	var d explain.Diff
	runJSON(t, &d, "diff", leakFile, "--from", "#5", "--to", "end", "--json")
	g := d.Groups[0]
	if d.From.At.Index != 5 || d.To.At.Index != 35 || g.Key != "log_hidden_states (/job/train.py:71)" ||
		g.BytesFrom != 1<<20 || g.BytesTo != 6<<20 || g.DeltaBytes != 5<<20 || g.CountFrom != 1 || g.CountTo != 6 ||
		g.BornCount != 5 || g.FreedCount != 0 {
		t.Fatalf("diff = %+v", d)
	}
	// two files of one job: the ends are compared
	runJSON(t, &d, "diff", leakFile, leakFile, "--json")
	for _, g := range d.Groups {
		if g.DeltaBytes != 0 || g.BornCount != 0 || g.FreedCount != 0 {
			t.Errorf("a file against itself: %+v", g)
		}
	}
}

func TestExplainJSON(t *testing.T) {
	var e explain.Explanation
	runJSON(t, &e, "explain", leakFile, "--json")
	d := e.Devices[0]
	o := d.OOMs[0]
	if o.Kind != "oom" || o.Verdict != "fragmentation" || o.Op != "aten::cat" || o.RequestedBytes != 20<<20 ||
		o.DeviceFreeBytes == nil || *o.DeviceFreeBytes != 2<<20 || o.LargestCachedFreeBytes != 10<<20 ||
		len(o.TopHolders) == 0 || len(o.WhatIf) != 3 || o.WhatIf[0].Conf != "baseline" {
		t.Fatalf("oom = %+v", o)
	}
	if !slices.ContainsFunc(o.Frames, func(f explain.Frame) bool { return f.Name == "KVCache.append" }) {
		t.Errorf("frames %+v", o.Frames)
	}
	if len(d.LeakSuspects) != 1 || d.LeakSuspects[0].Key != "log_hidden_states (/job/train.py:71)" ||
		d.LeakSuspects[0].GrowthBytesPerStep != 1<<20 || len(d.LeakSuspects[0].Steps) != 6 {
		t.Errorf("leak suspects %+v", d.LeakSuspects)
	}
	code, out, _ := captureRun(t, "explain", leakFile, "--no-whatif")
	if code != 0 || !strings.Contains(out, "verdict: fragmentation\n    ") || !strings.Contains(out, "the what-if tries other allocator settings") || !strings.Contains(out, "log_hidden_states") {
		t.Errorf("text: exit %d\n%s", code, out)
	}
}

func TestExplainWhatIfFlagsExclusive(t *testing.T) {
	code, _, errOut := captureRun(t, "explain", leakFile, "--whatif", "--no-whatif")
	if code != 2 || !strings.Contains(errOut, "--whatif and --no-whatif exclude each other") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func TestCheckBaseline(t *testing.T) {
	// the 2.0 capture holds 11 GiB at its peak, the 1.3b one 5.3 GiB
	big := fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle")
	small := fixture.Path(t, "snapshots/cuda-2.0-flexgen-1.3b_snapshot.pickle")
	code, _, errOut := captureRun(t, "check", big, "--baseline", small, "--max-growth", "10")
	if code != 1 || !strings.Contains(errOut, "peak active") || !strings.Contains(errOut, "--max-growth 10%") {
		t.Errorf("grown: exit %d %q", code, errOut)
	}
	if code, _, errOut := captureRun(t, "check", small, "--baseline", big, "--max-growth", "10"); code != 0 {
		t.Errorf("shrunk: exit %d %q", code, errOut)
	}
	for _, args := range [][]string{
		{"check", small, "--baseline", big},
		{"check", small, "--max-growth", "5"},
		{"check", small, "--baseline", "/nonexistent.pickle", "--max-growth", "5"},
	} {
		if code, _, errOut := captureRun(t, args...); code != 2 {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}

// demoOut runs `npumon demo` headless with --out until its --steps are done
// (a headless demo ends with its job) and returns its snapshot files,
// oldest first.
func demoOut(t *testing.T, args ...string) []string {
	t.Helper()
	dir := t.TempDir()
	full := append([]string{"demo", "--out", dir, "--rate", "1000", "--layers", "2", "--headless", "2m"}, args...)
	if code, _, errOut := captureRun(t, full...); code != 0 {
		t.Fatalf("%v: exit %d %q", full, code, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pickle"))
	if len(files) == 0 {
		ents, _ := os.ReadDir(dir)
		t.Fatalf("%v wrote no snapshot (%v)", full, ents)
	}
	slices.Sort(files)
	return files
}

// TestExplainDemoLeakNoProfiler: a leak run without a profiler carries no
// ProfilerStep#N ranges; explain cuts the trace into iterations by its
// repeat period and still names the leaking call site first.
func TestExplainDemoLeakNoProfiler(t *testing.T) {
	files := demoOut(t, "--scenario", "leak", "--steps", "30", "--snapshot-every", "30", "--device-mem", "4GiB", "--no-profiler")
	if dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(files[0]), "*_ascend_pt")); len(dirs) != 0 {
		t.Fatalf("--no-profiler wrote profiler directories %v", dirs)
	}
	var e explain.Explanation
	runJSON(t, &e, "explain", files[len(files)-1], "--json", "--no-whatif")
	d := e.Devices[0]
	ls := d.LeakSuspects
	if d.StepSource != explain.StepsPeriod || d.Steps < 20 || len(ls) == 0 ||
		ls[0].Key != "log_hidden_states (train.py:71)" || ls[0].GrowthBytesPerStep <= 0 {
		t.Fatalf("steps %d from %q, leak suspects %+v", d.Steps, d.StepSource, ls)
	}
	_, out, _ := captureRun(t, "explain", files[len(files)-1], "--no-whatif")
	if !strings.Contains(out, fmt.Sprintf("steps: %d from the trace's repeat period", d.Steps)) {
		t.Fatalf("explain does not name the steps' source:\n%s", out)
	}
	// 300 steps overflow the 100,000-entry history: the trace starts
	// inside a step.
	files = demoOut(t, "--scenario", "leak", "--steps", "300", "--snapshot-every", "300", "--device-mem", "16GiB", "--no-profiler")
	runJSON(t, &e, "explain", files[len(files)-1], "--json", "--no-whatif")
	d = e.Devices[0]
	if ls = d.LeakSuspects; d.StepSource != explain.StepsPeriod || d.Steps < 200 || len(ls) == 0 ||
		ls[0].Key != "log_hidden_states (train.py:71)" || ls[0].GrowthBytesPerStep <= 0 {
		t.Fatalf("a cut history: steps %d from %q, leak suspects %+v", d.Steps, d.StepSource, ls)
	}
}

// TestExplainNPUStepsWithoutProfiler: the real torch_npu dump has no time_us
// and no annotations; its three training iterations come from the
// optimizer's step call site (torch/optim/adam.py step). Its call sites'
// live bytes are the same at every iteration's end (an independent
// reading: replay/testdata/ref_explain.py), so no call site is a suspect.
func TestExplainNPUStepsWithoutProfiler(t *testing.T) {
	f := "../../testdata/fixtures/snapshots/npu-2.6-msinsight-snapshot_1768383987920985470.pkl"
	var e explain.Explanation
	runJSON(t, &e, "explain", f, "--json", "--no-whatif")
	d := e.Devices[0]
	if d.StepSource != explain.StepsOptimizer || d.Steps != 3 || len(d.LeakSuspects) != 0 {
		t.Fatalf("steps %d from %q, leak suspects %+v", d.Steps, d.StepSource, d.LeakSuspects)
	}
}

// TestExplainDemoLeak: the leak scenario's late snapshot names the leaking
// call site first among the leak suspects.
func TestExplainDemoLeak(t *testing.T) {
	files := demoOut(t, "--scenario", "leak", "--steps", "30", "--snapshot-every", "10", "--device-mem", "4GiB")
	var e explain.Explanation
	runJSON(t, &e, "explain", files[len(files)-1], "--json", "--no-whatif")
	ls := e.Devices[0].LeakSuspects
	if e.Devices[0].Steps < 20 || len(ls) == 0 || ls[0].Key != "log_hidden_states (train.py:71)" || ls[0].GrowthBytesPerStep <= 0 {
		t.Fatalf("steps %d, leak suspects %+v", e.Devices[0].Steps, ls)
	}
	// the profiler directories of the same run name the ops the leak was made in
	args := []string{"holders", files[len(files)-1], "--at", "end", "--by", "op", "--json"}
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(files[0]), "*_ascend_pt"))
	if len(dirs) == 0 {
		t.Fatal("the demo wrote no profiler directory")
	}
	for _, d := range dirs {
		args = append(args, "--profiler", d)
	}
	var h explain.Holders
	runJSON(t, &h, args...)
	if !slices.ContainsFunc(h.Groups, func(g explain.Group) bool { return g.Key == "aten::clone" }) {
		t.Errorf("by op with --profiler: %+v", h.Groups)
	}
	if code, _, errOut := captureRun(t, "explain", files[0], "--profiler", "/nonexistent"); code != 2 || strings.Count(errOut, "\n") > 1 {
		t.Errorf("bad --profiler: exit %d %q", code, errOut)
	}
}

// TestExplainDemoFragmentation: on a small device the fragmentation
// scenario fails for fragmentation; the what-if's baseline, on the device
// size the oom entry gives (reserved + device free), reproduces that OOM,
// and an alternative is called a fix only with it.
func TestExplainDemoFragmentation(t *testing.T) {
	files := demoOut(t, "--scenario", "fragmentation", "--steps", "10", "--snapshot-every", "0", "--device-mem", "512MiB", "--layers", "48")
	var e explain.Explanation
	runJSON(t, &e, "explain", files[0], "--json")
	o := e.Devices[0].OOMs[0]
	if o.Kind != "oom" || o.Verdict != "fragmentation" {
		t.Fatalf("oom %+v", o)
	}
	// the first dump is the first OOM's: a later OOM of the same second
	// (dumps are named by the second) must not overwrite it
	if n := len(e.Devices[0].OOMs); n != 1 {
		t.Errorf("the first OOM dump explains %d oom entries, want 1: a later OOM overwrote it", n)
	}
	tr := e.Devices[0].WhatIfTrust
	if tr == nil || !tr.Reproduces || tr.ReproducesOOM == nil || !*tr.ReproducesOOM || o.WhatIf[0].Verdict != whatif.VerdictReproduces {
		t.Fatalf("the baseline does not reproduce the demo's own run: %+v, %+v", tr, o.WhatIf)
	}
	for _, r := range o.WhatIf[1:] {
		if r.Fits != (r.Verdict == whatif.VerdictFits) || r.Verdict == whatif.VerdictUntrusted {
			t.Errorf("alternative %+v", r)
		}
	}
}

// TestExplainDemoOOM: the oom scenario's snapshot names KVCache.append as
// the failing request's stack and as the top holder.
func TestExplainDemoOOM(t *testing.T) {
	files := demoOut(t, "--scenario", "oom", "--steps", "12", "--snapshot-every", "0", "--device-mem", "2GiB")
	var e explain.Explanation
	runJSON(t, &e, "explain", files[0], "--json", "--no-whatif")
	o := e.Devices[0].OOMs[0]
	if !slices.ContainsFunc(o.Frames, func(f explain.Frame) bool { return f.Name == "KVCache.append" }) ||
		o.TopHolders[0].Key != "KVCache.append (cache.py:33)" {
		t.Fatalf("oom %+v", o)
	}
}

// TestDiffSaysWhatIsWrong: a moment that cannot be resolved names --from
// (not holders' --at); two files that are not one job, or a diff that runs
// backwards, warn on stderr, one line each, and still diff.
func TestDiffSaysWhatIsWrong(t *testing.T) {
	code, _, errOut := captureRun(t, "diff", leakFile, "--from", "oom:2")
	if code != 2 || !strings.Contains(errOut, "--from \"oom:2\"") || strings.Contains(errOut, "--at") {
		t.Errorf("--from oom:2: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := captureRun(t, "diff", leakFile, npuFile)
	if code != 0 || out == "" || strings.Count(errOut, "npumon diff: warning: ") != 1 || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, "do not look like one job") {
		t.Errorf("two unrelated files: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = captureRun(t, "diff", leakFile, "--from", "end", "--to", "#-1")
	if code != 0 || !strings.Contains(errOut, "npumon diff: warning: --to #-1") || !strings.Contains(errOut, "runs backwards") {
		t.Errorf("--from end --to #-1: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = captureRun(t, "diff", leakFile, leakFile)
	if code != 0 || errOut != "" {
		t.Errorf("one job: exit %d, stderr %q", code, errOut)
	}
}
