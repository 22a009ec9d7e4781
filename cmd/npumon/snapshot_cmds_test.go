package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
)

const (
	npuFile = "../../replay/testdata/npu_workspace.pickle"
)

func TestStatsJSON(t *testing.T) {
	var st replay.Stats
	runJSON(t, &st, "stats", "--json", fixture2026(t))
	d := st.Devices[0]
	if st.Kind != "snapshot" || st.Format != "pickle" || st.Schema != "torch-2.1+" || !st.HasTimestamps || len(st.Devices) != 1 ||
		d.Segments != 216 || d.Blocks != 455 || d.TraceEntries != 5163 || d.PeakActiveIndex != 1402 || d.PeakActiveBytes != 13923997700 {
		t.Errorf("stats = %+v", st)
	}
	// Nulls where the file has no time.
	code, out, _ := captureRun(t, "stats", "--json", npuFile)
	if code != 0 || !strings.Contains(out, `"first_time_us": null`) || !strings.Contains(out, `"schema": "torch_npu"`) {
		t.Errorf("npu stats: exit %d\n%s", code, out)
	}
}

func TestStatsAtIndexAndDevice(t *testing.T) {
	code, out, errOut := captureRun(t, "stats", "--json", "--at-index", "1402", "--device", "0", fixture2026(t))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var st replay.Stats
	json.Unmarshal([]byte(out), &st)
	if st.AtIndex == nil || *st.AtIndex != 1402 || st.Devices[0].ActiveBytes != 13923997700 {
		t.Errorf("at-index stats = %+v", st)
	}
	for _, args := range [][]string{
		{"stats", "--at-index", "99999", fixture2026(t)},
		{"stats", "--device", "3", fixture2026(t)},
		{"stats", "../../replay/testdata/bad_truncated.pickle"},
		{"stats", "no-such-file.pickle"},
		{"stats"},
	} {
		code, _, errOut := captureRun(t, args...)
		if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") > 1 || !strings.Contains(errOut, "npumon:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	_, _, errOut = captureRun(t, "stats", "../../replay/testdata/bad_truncated.pickle")
	if !strings.Contains(errOut, "bad_truncated.pickle: offset 720: unexpected end of file") {
		t.Errorf("truncated: %q", errOut)
	}
}

func TestStatsText(t *testing.T) {
	code, out, _ := captureRun(t, "stats", fixture2026(t))
	for _, want := range []string{"device 0", "segments            216", "peak active", "after entry 1402", "13.2 GiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d", code)
	}
}

// A directory and a profiler .db file go to the profiler reader; anything
// else is read as a snapshot.
func TestStatsDispatch(t *testing.T) {
	code, _, errOut := captureRun(t, "stats", t.TempDir())
	if code != 2 || strings.Contains(errOut, "not a memory snapshot") {
		t.Errorf("empty directory: exit %d %q", code, errOut)
	}
	db := "../../profiler/testdata/db/ascend_pytorch_profiler_0.db"
	code, out, errOut := captureRun(t, "stats", "--json", db)
	if code != 0 || !strings.Contains(out, `"kind": "profiler"`) {
		t.Errorf("db file: exit %d %q %q", code, out, errOut)
	}
	code, out, _ = captureRun(t, "stats", "--json", fixture2026(t))
	if code != 0 || !strings.Contains(out, `"kind": "snapshot"`) {
		t.Errorf("snapshot file: exit %d", code)
	}
}

func TestCheck(t *testing.T) {
	code, _, errOut := captureRun(t, "check", fixture2026(t), "--max-peak", "14GiB", "--max-reserved", "14 GiB", "--no-oom")
	if code != 0 {
		t.Errorf("limits that hold: exit %d %q", code, errOut)
	}
	code, _, errOut = captureRun(t, "check", fixture2026(t), "--max-peak", "10GiB", "--max-inactive-pct", "50")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 1 || len(lines) != 2 || !strings.Contains(lines[0], "peak active") || !strings.Contains(lines[1], "inactive fraction 90.3%") {
		t.Errorf("violations: exit %d, %q", code, errOut)
	}
	// Each fragmentation formula has its own flag and its own words.
	for _, tc := range []struct {
		name, flag, want string
	}{
		{"inactive fraction", "--max-inactive-pct", "inactive fraction 90.3% (inactive"},
		{"old name of the inactive fraction", "--max-fragmentation", "inactive fraction 90.3% (inactive"},
		{"free fragmentation", "--max-free-fragmentation", "free fragmentation 97.4% (largest free block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := captureRun(t, "check", fixture2026(t), tc.flag, "50")
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("%s 50: exit %d, %q; want 1 and %q", tc.flag, code, errOut, tc.want)
			}
		})
	}
	code, _, errOut = captureRun(t, "check", npuFile, "--no-oom")
	if code != 1 || !strings.Contains(errOut, "1 oom event") {
		t.Errorf("--no-oom: exit %d %q", code, errOut)
	}
	for _, args := range [][]string{
		{"check", fixture2026(t), "--max-peak", "lots"},
		{"check", fixture2026(t), "--max-fragmentation", "120"},
		{"check", fixture2026(t), "--max-free-fragmentation", "-1"},
		{"check", "../../replay/testdata/bad_global.pickle"},
	} {
		if code, _, errOut := captureRun(t, args...); code != 2 {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}

func TestExportRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for i, to := range [][]string{{"--to", "pickle"}, {"--to", "json"}, {"--to", "json", "--pretty"}} {
		out := filepath.Join(dir, fmt.Sprintf("snap%d.%s", i, to[1]))
		if code, _, errOut := captureRun(t, append([]string{"export", fixture2026(t), "-o", out}, to...)...); code != 0 {
			t.Fatalf("export %s: exit %d %q", to, code, errOut)
		}
		_, a, _ := captureRun(t, "stats", "--json", fixture2026(t))
		_, b, _ := captureRun(t, "stats", "--json", out)
		a = strings.Replace(a, fixture2026(t), "X", 1)
		b = strings.Replace(strings.Replace(b, out, "X", 1), `"format": "json"`, `"format": "pickle"`, 1)
		if a != b {
			t.Errorf("stats of the %s export differ:\n%s\n%s", to, a, b)
		}
	}
	out := filepath.Join(dir, "list.pickle")
	if code, _, _ := captureRun(t, "export", fixture2026(t), "--to", "pickle", "--schema", "1.13", "-o", out); code != 0 {
		t.Fatal("1.13 export failed")
	}
	_, b, _ := captureRun(t, "stats", "--json", out)
	if !strings.Contains(b, `"schema": "torch-1.13"`) {
		t.Errorf("1.13 export reads back as %s", b)
	}
	for _, args := range [][]string{
		{"export", fixture2026(t), "--to", "xml", "-o", out},
		{"export", fixture2026(t), "--to", "json"},
		{"export", fixture2026(t), "--to", "pickle", "--pretty", "-o", out},
		{"export", fixture2026(t), "--to", "json", "--schema", "0.9", "-o", out},
		{"export", "../../replay/testdata/bad_reduce.pickle", "--to", "json", "-o", filepath.Join(dir, "x")},
	} {
		if code, _, _ := captureRun(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("failed export left an output file")
	}
}

// fixture2026 is the real torch 2026 capture most command tests read.
func fixture2026(t testing.TB) string {
	return fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
}
