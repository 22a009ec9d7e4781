package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

func TestStatsProfilerDirJSON(t *testing.T) {
	dir := filepath.Join(profFixtures(t), "msinsight_rank0")
	var v map[string]any
	runJSON(t, &v, "stats", "--json", dir)
	for _, k := range []string{"path", "kind", "ops", "first_time_us", "last_time_us", "memory_records", "top_ops", "devices"} {
		if _, ok := v[k]; !ok {
			t.Errorf("missing key %q", k)
		}
	}
	if v["kind"] != "profiler" || v["ops"] != 2.0 || v["memory_records"] != 11.0 || v["first_time_us"] != 1695115378653323.0 {
		t.Errorf("values %v", v)
	}
	dev := v["devices"].([]any)[0].(map[string]any)
	// 4599.86572265625 MB × 2^20; the 5-column memory_record has no active column
	if dev["device"] != 0.0 || dev["peak_allocated_bytes"] != 4823308800.0 || dev["peak_active_bytes"] != nil {
		t.Errorf("device %v", dev)
	}
	top := v["top_ops"].([]any)[0].(map[string]any)
	if top["name"] != "aten::zero_" || top["count"] != 1.0 || top["total_us"] != 256.85 {
		t.Errorf("top op %v", top)
	}
}

func TestStatsProfilerDirText(t *testing.T) {
	code, out, errOut := captureRun(t, "stats", filepath.Join(profFixtures(t), "mstt"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"profiler data (analysed", "ops       710 (1 steps)", "aten::item", "2024-01-02 02:11:51"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestStatsProfilerDirErrors(t *testing.T) {
	code, _, errOut := captureRun(t, "stats", t.TempDir())
	if code != 2 || !strings.Contains(errOut, "not a profiler directory") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestStatsProfilerDBDir: a directory whose analysed output is a SQLite
// export (here the real CANN msprof database) is summarised the same way.
func TestStatsProfilerDBDir(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(profFixtures(t), "msinsight_msprof_0.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "msprof_0.db"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	runJSON(t, &v, "stats", "--json", dir)
	if v["kind"] != "profiler" || v["ops"] != 17.0 || v["memory_records"] != 494.0 ||
		v["first_time_us"] != 1698220811391886.0 || v["last_time_us"] != 1753431345194404.0 {
		t.Errorf("values %v", v)
	}
	// NPU_OP_MEM has no PTA rows: the peaks come from PTA+GE; no active column
	dev := v["devices"].([]any)[0].(map[string]any)
	if dev["device"] != 0.0 || dev["peak_allocated_bytes"] != 131072.0 || dev["peak_reserved_bytes"] != 1229258752.0 || dev["peak_active_bytes"] != nil {
		t.Errorf("device %v", dev)
	}
	code, out, errOut := captureRun(t, "stats", dir)
	if code != 0 || !strings.Contains(out, "profiler data (db, no analyse.done)") || !strings.Contains(out, "aclrtMemcpy") {
		t.Errorf("text: exit %d %s%s", code, out, errOut)
	}
	// the export mixes sessions (15,336 hours, op names that are dtype
	// lists): the text and, for --json, stderr say so (profiler.Sanity)
	if !strings.Contains(out, ": implausible: its ops and memory records span 15336 hours") ||
		!strings.Contains(out, "op names are dtype or shape lists") {
		t.Errorf("text without the sanity warnings:\n%s", out)
	}
	code, _, errOut = captureRun(t, "stats", "--json", dir)
	if code != 0 || strings.Count(errOut, "npumon: warning: ") != 2 || !strings.Contains(errOut, "span 15336 hours") {
		t.Errorf("json: exit %d, stderr %q", code, errOut)
	}
	if err := os.WriteFile(filepath.Join(dir, "msprof_0.db"), []byte("not sqlite"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = captureRun(t, "stats", dir)
	if code != 2 || !strings.Contains(errOut, "msprof_0.db: not an SQLite database") || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("bad db: exit %d, stderr %q", code, errOut)
	}
}

func profFixtures(t testing.TB) string { return fixture.Path(t, "ascend_profiler") }
