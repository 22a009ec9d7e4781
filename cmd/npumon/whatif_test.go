package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/replay/whatif"
)

const whatifTrace = "../../replay/whatif/sim/testdata/fragmentation.pickle"

func TestWhatifText(t *testing.T) {
	code, out, errOut := captureRun(t, "whatif", whatifTrace, "--conf", "expandable_segments:True")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"baseline settings: defaults (the file has no allocator_settings)",
		"device memory: 1024.00 MiB, from the oom entry 110",
		"baseline                  900.00 MiB",
		"entry 110 (200.00 MiB)",
		"expandable_segments:True",
		"none (recorded OOM fits)",
		"baseline fidelity: reserved curve max |Δ| 0 bytes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestWhatifJSON(t *testing.T) {
	var res struct {
		Flavour   string `json:"flavour"`
		Placement string `json:"device_placement"`
		Devices   []struct {
			DeviceMem       int64  `json:"device_mem"`
			DeviceMemSource string `json:"device_mem_source"`
			Runs            []struct {
				Name     string           `json:"name"`
				OOMs     int              `json:"ooms"`
				Reserved []map[string]int `json:"reserved"`
			} `json:"runs"`
			Fidelity struct {
				MaxAbsDiff int64 `json:"max_abs_diff"`
			} `json:"baseline_fidelity"`
		} `json:"devices"`
	}
	runJSON(t, &res, "whatif", "--json", "--device-mem", "2GiB", "--device-model", "paged", "--conf", "expandable_segments:True", whatifTrace)
	d := res.Devices[0]
	if res.Flavour != "npu" || res.Placement != "paged" || d.DeviceMem != 2<<30 || d.DeviceMemSource != "given (--device-mem)" {
		t.Errorf("flavour %s, device mem %d (%s)", res.Flavour, d.DeviceMem, d.DeviceMemSource)
	}
	// On 2 GiB the 200 MiB request fits even without expandable segments.
	if len(d.Runs) != 2 || d.Runs[0].OOMs != 0 || d.Runs[1].Name != "expandable_segments:True" || len(d.Runs[0].Reserved) != 12 {
		t.Errorf("runs %+v", d.Runs)
	}
}

func TestWhatifErrors(t *testing.T) {
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"whatif", whatifTrace, "--conf", "max_split_size_mb:10"}, "must be >= 20"},
		{[]string{"whatif", whatifTrace, "--conf", "bogus_key:1"}, "bogus_key"},
		{[]string{"whatif", whatifTrace, "--device-mem", "lots"}, "--device-mem"},
		{[]string{"whatif", whatifTrace, "--flavour", "rocm"}, "--flavour"},
		{[]string{"whatif", whatifTrace, "--device-model", "flat"}, "--device-model"},
		{[]string{"whatif", "/nonexistent/x.pickle"}, "/nonexistent/x.pickle"},
		{[]string{"whatif"}, "takes 1 argument"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			code, _, errOut := captureRun(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
			}
		})
	}
}

// TestWhatifReproducesWorkloadRuns re-simulates dumps of npumon's own
// training workload (the allocator and device npumon simulates, so the
// baseline must follow the recording exactly): cross-stream frees, OOMs,
// and recoveries with empty_cache.
func TestWhatifReproducesWorkloadRuns(t *testing.T) {
	for i, tc := range []struct {
		scenario workload.Scenario
		policy   workload.OOMPolicy
		steps    int
	}{
		{workload.Fragmentation, workload.Stop, 12},
		{workload.OOM, workload.Stop, 40},
		{workload.OOM, workload.Recover, 40},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			w, err := workload.New(workload.Config{Scenario: tc.scenario, OnOOM: tc.policy, Seed: 7, Steps: tc.steps,
				DeviceMem: 16 << 30, Out: t.TempDir(), NoProfile: true, SnapshotEvery: tc.steps})
			if err != nil {
				t.Fatal(err)
			}
			_ = w.Run(context.Background()) // Stop ends with the OOM error
			files := w.Files()
			if len(files) == 0 {
				t.Fatalf("%s/%s: no snapshot written", tc.scenario, tc.policy)
			}
			var res whatif.Result
			runJSON(t, &res, "whatif", "--json", "--conf", "expandable_segments:True", files[len(files)-1])
			d := res.Devices[0]
			base, f := d.Runs[0], d.Fidelity
			t.Logf("%s/%s: %d entries, %d deferred frees, %d empty_cache; recorded %d OOMs, peak %d; fidelity max |Δ| %d over %d points; expandable: %d OOMs, peak %d",
				tc.scenario, tc.policy, d.Input.Entries, d.Input.DeferredFrees, d.Input.EmptyCaches, d.Recorded.OOMs,
				d.Recorded.PeakReserved, f.MaxAbsDiff, f.Points, d.Runs[1].OOMs, d.Runs[1].PeakReserved)
			if f.MaxAbsDiff != 0 || f.FinalDiff != 0 || base.OOMs != d.Recorded.OOMs ||
				base.SegmentAllocs != int64(d.Recorded.SegmentAllocs) || base.SegmentFrees != int64(d.Recorded.SegmentFrees) {
				t.Errorf("%s/%s: baseline differs from the recording: fidelity %+v, OOMs %d vs %d, segments %d/%d vs %d/%d",
					tc.scenario, tc.policy, f, base.OOMs, d.Recorded.OOMs, base.SegmentAllocs, base.SegmentFrees,
					d.Recorded.SegmentAllocs, d.Recorded.SegmentFrees)
			}
			if d.Recorded.OOMs > 0 && (base.FirstOOM == nil || base.FirstOOM.Index != d.Recorded.FirstOOM.Index) {
				t.Errorf("%s/%s: baseline OOM %+v, recorded %+v", tc.scenario, tc.policy, base.FirstOOM, d.Recorded.FirstOOM)
			}
		})
	}
}

func TestWhatifOnRealFixture(t *testing.T) {
	snap := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	code, out, errOut := captureRun(t, "whatif", snap, "--conf", "expandable_segments:True")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"allocator flavour: cuda",
		`baseline settings: the file's allocator_settings (PYTORCH_CUDA_ALLOC_CONF="")`,
		"device model: paged",
		"5163 entries — 229 allocations live at the start, 1721 allocs, 1721 frees (0 deferred)",
		"final Δ -88.00 MiB",
		"the trace has no segment events",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestWhatifSameAlternativesAsExplain: without --conf, whatif and explain
// try one set of alternatives (whatif.Alternatives), and both carry the
// baseline's trust: on leak_steps.pickle (its baseline fits where the run
// ran out) neither calls an alternative a fix; on a snapshot without
// allocations there is nothing to simulate.
func TestWhatifSameAlternativesAsExplain(t *testing.T) {
	for _, file := range []string{leakFile, whatifTrace} {
		var w struct {
			Confs   []string `json:"alternatives"`
			Devices []struct {
				Trust whatif.Trust `json:"trust"`
				Runs  []whatif.Run `json:"runs"`
			} `json:"devices"`
		}
		runJSON(t, &w, "whatif", file, "--json")
		var e explain.Explanation
		runJSON(t, &e, "explain", file, "--json")
		var confs []string
		for _, r := range e.Devices[0].OOMs[0].WhatIf[1:] {
			confs = append(confs, r.Conf)
		}
		if len(w.Confs) != 2 || strings.Join(w.Confs, ",") != strings.Join(confs, ",") {
			t.Errorf("%s: whatif tries %v, explain %v", file, w.Confs, confs)
		}
		tr := e.Devices[0].WhatIfTrust
		if tr == nil || tr.Reproduces != w.Devices[0].Trust.Reproduces {
			t.Errorf("%s: explain trust %+v, whatif %+v", file, tr, w.Devices[0].Trust)
		}
		for _, r := range w.Devices[0].Runs {
			if r.Verdict == whatif.VerdictFits && !w.Devices[0].Trust.Reproduces {
				t.Errorf("%s: %s fits without reproduction", file, r.Name)
			}
		}
	}
	_, out, _ := captureRun(t, "whatif", leakFile)
	if !strings.Contains(out, "the simulation does not reproduce this run") || !strings.Contains(out, "not a fix") {
		t.Errorf("leak_steps:\n%s", out)
	}
	f := fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle")
	_, out, _ = captureRun(t, "whatif", f)
	if !strings.Contains(out, "nothing to simulate") || strings.Contains(out, "fits") {
		t.Errorf("a snapshot without allocations:\n%s", out)
	}
	_, out, _ = captureRun(t, "explain", f)
	if !strings.Contains(out, "what-if not run: no oom entry (--whatif runs it)") || strings.Contains(out, "nothing to simulate") {
		t.Errorf("explain without an oom entry runs no what-if unless asked:\n%s", out)
	}
	_, out, _ = captureRun(t, "explain", f, "--whatif")
	if !strings.Contains(out, "what-if: nothing to simulate") || strings.Contains(out, "fits") {
		t.Errorf("explain on a snapshot without allocations:\n%s", out)
	}
}
