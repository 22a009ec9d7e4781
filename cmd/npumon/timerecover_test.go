package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/monitor/workload"
)

// untimedDemo runs the demo's OOM job with --out and writes its snapshot
// as torch_npu does: the same JSON without any time_us, named as the
// pickle (so the runs beside it carry its process id).
func untimedDemo(t *testing.T) (snap string, runs []string) {
	t.Helper()
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Scenario: workload.OOM, OnOOM: workload.Stop, Seed: 5, Steps: 40,
		DeviceMem: 16 << 30, Out: dir})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Run(t.Context()) // Stop ends with the OOM error
	files := w.Files()
	if len(files) == 0 {
		t.Fatal("no snapshot")
	}
	pkl := files[len(files)-1]
	full := filepath.Join(t.TempDir(), "full.json")
	// the torch shape (--pretty): the edit below rewrites it through a Go map,
	// which sorts the keys (the compact form's marker must stay first)
	if code, _, errOut := captureRun(t, "export", pkl, "--to", "json", "--pretty", "-o", full); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	var doc map[string]any
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, tr := range doc["device_traces"].([]any) {
		for _, e := range tr.([]any) {
			delete(e.(map[string]any), "time_us")
		}
	}
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	snap = strings.TrimSuffix(pkl, filepath.Ext(pkl)) + ".json"
	if err := os.WriteFile(snap, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return snap, w.ProfilerDirs()
}

type timeStats struct {
	HasTimestamps bool `json:"has_timestamps"`
	Devices       []struct {
		TimeSource         string   `json:"time_source"`
		TimeRecoveredFrom  *string  `json:"time_recovered_from"`
		TimeRecoveredShare *float64 `json:"time_recovered_share"`
	} `json:"devices"`
}

// TestTimeRecovery: stats, export and explain give a torch_npu-style
// snapshot the times of the job's profiler runs, named or found beside it;
// a run of another process is refused with a line.
func TestTimeRecovery(t *testing.T) {
	snap, runs := untimedDemo(t)
	for _, args := range [][]string{
		{"stats", "--json", snap},
		append([]string{"stats", "--json", snap}, "--profiler", runs[0], "--profiler", runs[1]),
	} {
		var st timeStats
		runJSON(t, &st, args...)
		d := st.Devices[0]
		if d.TimeSource != "recovered" || d.TimeRecoveredFrom == nil || *d.TimeRecoveredFrom != "framework" ||
			d.TimeRecoveredShare == nil || *d.TimeRecoveredShare <= 0.2 {
			t.Fatalf("%v: %+v", args, d)
		}
	}
	// replay: the trace on the epoch axis, the note says how much
	var sum struct {
		TimeBase string `json:"time_base"`
		Note     string `json:"note"`
	}
	runJSON(t, &sum, "replay", "--headless", "1ms", snap)
	if sum.TimeBase != "epoch_us" || !strings.HasPrefix(sum.Note, "times recovered ") {
		t.Errorf("replay: %+v", sum)
	}
	out := filepath.Join(t.TempDir(), "out.json")
	if code, _, errOut := captureRun(t, "export", snap, "--to", "json", "-o", out); code != 0 {
		t.Fatalf("export: %s", errOut)
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), `"time_us"`) {
		t.Error("export wrote no time_us")
	}
	// another process's run: refused, the file keeps no times
	other := filepath.Join(t.TempDir(), "host_99999_20260101000000000"+"_ascend_pt")
	if err := os.Rename(runs[0], other); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := captureRun(t, "stats", "--json", snap, "--profiler", other)
	var st timeStats
	if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil || st.Devices[0].TimeSource != "none" ||
		!strings.Contains(errOut, "process 99999") {
		t.Fatalf("another process's run: exit %d, %s, stderr %q", code, stdout, errOut)
	}
}
