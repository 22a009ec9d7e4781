package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTo copies src into dir as name.
func copyTo(t *testing.T, src, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExplainMemUsageBeside: explain reads the memUsageInfo CSV beside an
// oom snapshot (same directory, device, nearest stamp) and its verdict
// says how much of the device the modules hold; a CSV that does not parse
// is a one-line warning and the explanation goes on.
func TestExplainMemUsageBeside(t *testing.T) {
	dir := t.TempDir()
	snap := copyTo(t, "../../replay/testdata/cuda21_p4.pickle", dir, "oom_snapshot_7526_20261201103015.pickle")
	copyTo(t, "../../replay/memusage/testdata/device_0_memUsageInfo_20261201103016.csv", dir, "device_0_memUsageInfo_20261201103016.csv")
	copyTo(t, "../../replay/memusage/testdata/bad_negative.csv", dir, "device_1_memUsageInfo_20261201103016.csv")
	code, out, errOut := captureRun(t, "explain", "--no-whatif", snap)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "1.56 GiB of the device is held outside the caching allocator (device_0_memUsageInfo_20261201103016.csv, 1 s after the snapshot): HCCL 1.20 GiB, RUNTIME 310.00 MiB, AICPU 64.00 MiB") {
		t.Errorf("text:\n%s", out)
	}
	want := "npumon: warning: " + filepath.Join(dir, "device_1_memUsageInfo_20261201103016.csv") + `: line 3: curMemSize(MB): "-3" is not a non-negative number of MB`
	if !strings.Contains(errOut, want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
		t.Errorf("stderr %q, want one line %q", errOut, want)
	}
	var e struct {
		Devices []struct {
			Outside *struct {
				File       string `json:"file"`
				TotalBytes int64  `json:"total_bytes"`
			} `json:"outside_allocator"`
		} `json:"devices"`
	}
	runJSON(t, &e, "explain", "--no-whatif", "--json", dir)
	if len(e.Devices) < 1 || e.Devices[0].Outside == nil || e.Devices[0].Outside.TotalBytes != 1602<<20 {
		t.Errorf("json: %+v", e)
	}
}
