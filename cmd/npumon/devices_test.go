package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// standInOnPath puts the stand-in npu-smi printing the recorded output
// info first on PATH and returns its directory.
func standInOnPath(t *testing.T, info string) string {
	t.Helper()
	dir := fixture.NPUSMIStandIn(t, "npu-smi/"+info)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(envNPUSMI, "")
	t.Setenv(envNPUSMIInterval, "")
	return dir
}

// rows returns the output's lines with their fields single-spaced.
func rows(out string) []string {
	var r []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		r = append(r, strings.Join(strings.Fields(l), " "))
	}
	return r
}

// TestDevicesRecordedLayouts runs npumon devices on each recorded npu-smi
// output; the expected rows are the fixtures' figures, copied by hand.
func TestDevicesRecordedLayouts(t *testing.T) {
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"npu-smi-info-910B3x8-24.1.rc1.txt", []string{
			"npu-smi 24.1.rc1.b030 (npu-smi)",
			"NPU Chip Name Health Power(W) Temp(C) AICore(%) HBM-Usage(MB)",
			"0 0 910B3 OK 101.8 43 0 3318 / 65536",
			"1 0 910B3 OK 92.0 39 0 3314 / 65536",
			"2 0 910B3 OK 102.0 40 0 3314 / 65536",
			"3 0 910B3 OK 99.8 40 0 3314 / 65536",
			"4 0 910B3 OK 98.6 45 0 3314 / 65536",
			"5 0 910B3 OK 99.7 44 0 3314 / 65536",
			"6 0 910B3 OK 103.8 45 0 3314 / 65536",
			"7 0 910B3 OK 98.2 44 0 3315 / 65536",
			"",
			"No processes hold device memory.",
		}},
		{"npu-smi-info-910B2C-23.0.2.1-procs.txt", []string{
			"npu-smi 23.0.2.1 (npu-smi)",
			"NPU Chip Name Health Power(W) Temp(C) AICore(%) HBM-Usage(MB)",
			"0 0 910B2C OK 88.6 51 0 20701 / 65536",
			"1 0 910B2C OK 99.6 50 0 20687 / 65536",
			"",
			"NPU Chip PID Process Memory(MB)",
			"0 0 124528 python3.8 17400",
		}},
		{"npu-smi-info-310B4-nohbm-23.0.0.txt", []string{
			"npu-smi 23.0.0 (npu-smi)",
			"NPU Chip Name Health Power(W) Temp(C) AICore(%) Memory-Usage(MB)",
			"0 0 310B4 Alarm 0.0 65 0 3628 / 15609",
			"",
			"No processes hold device memory.",
		}},
		{"npu-smi-info-310P3-24.1.0.1-procs.txt", []string{
			"npu-smi 24.1.0.1 (npu-smi)",
			"NPU Chip Name Health Power(W) Temp(C) AICore(%) Memory-Usage(MB)",
			"1 0 310P3 OK NA 62 0 16302 / 44280",
			"1 1 310P3 OK NA 62 0 15543 / 43693",
			"2 0 310P3 OK NA 61 0 35563 / 44280",
			"2 1 310P3 OK NA 61 0 35204 / 43693",
			"",
			"NPU Chip PID Process Memory(MB)",
			"1 0 3277562 mindie_llm_back 14513",
			"1 1 3277565 mindie_llm_back 14513",
			"2 0 3034986 mindie_llm_back 34207",
			"2 1 3034989 mindie_llm_back 33740",
		}},
		{"npu-smi-info-910B3-container-25.2.3.txt", []string{
			"npu-smi 25.2.3 (npu-smi)",
			"NPU Chip Name Health Power(W) Temp(C) AICore(%) HBM-Usage(MB)",
			"3 0 910B3 OK 92.8 36 0 3198 / 65536",
			"",
			"No processes hold device memory.",
		}},
		{"npu-smi-info-A3-2chip-25.2.0.txt", []string{
			"npu-smi 25.2.0 (npu-smi)",
			"NPU Chip Name Health Power(W) Temp(C) AICore(%) HBM-Usage(MB)",
			"0 0 Ascend910 OK 162.8 37 0 3133 / 65536",
			"0 1 Ascend910 OK NA 37 0 2876 / 65536",
			"1 0 Ascend910 OK 167.1 38 0 3116 / 65536",
			"1 1 Ascend910 OK NA 38 0 10568 / 65536",
			"",
			"NPU Chip PID Process Memory(MB)",
			"1 1 990711 python 7746",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			standInOnPath(t, tc.file)
			code, out, errOut := captureRun(t, "devices")
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if got := rows(out); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestDevicesJSONRecorded checks the --json figures (MB × 2^20) of the
// layouts with processes, a missing HBM column and NA power.
func TestDevicesJSONRecorded(t *testing.T) {
	const mib = 1 << 20
	standInOnPath(t, "npu-smi-info-310P3-24.1.0.1-procs.txt")
	var got []map[string]any
	runJSON(t, &got, "devices", "--json")
	if len(got) != 4 {
		t.Fatalf("%d chips", len(got))
	}
	c := got[2]
	if c["id"] != 2.0 || c["chip"] != 0.0 || c["logical_id"] != 2.0 || c["phy_id"] != nil || c["name"] != "310P3" ||
		c["health"] != "OK" || c["bus_id"] != "0000:02:00.0" || c["power_w"] != nil || c["temp_c"] != 61.0 ||
		c["aicore_pct"] != 0.0 || c["hbm_used_bytes"] != nil || c["hbm_total_bytes"] != nil ||
		c["memory_used_bytes"] != float64(35563*mib) || c["memory_total_bytes"] != float64(44280*mib) {
		t.Errorf("310P3 NPU 2 chip 0: %v", c)
	}
	ps := c["processes"].([]any)
	if len(ps) != 1 {
		t.Fatalf("processes %v", ps)
	}
	if p := ps[0].(map[string]any); len(p) != 3 || p["pid"] != 3034986.0 || p["name"] != "mindie_llm_back" || p["memory_bytes"] != float64(34207*mib) {
		t.Errorf("process %v", p)
	}

	standInOnPath(t, "npu-smi-info-A3-2chip-25.2.0.txt")
	runJSON(t, &got, "devices", "--json")
	c = got[3]
	if c["id"] != 1.0 || c["chip"] != 1.0 || c["phy_id"] != 3.0 || c["power_w"] != nil || c["hbm_used_bytes"] != float64(10568*mib) ||
		c["hbm_total_bytes"] != float64(65536*mib) || len(c["processes"].([]any)) != 1 {
		t.Errorf("A3 NPU 1 chip 1: %v", c)
	}
	if c := got[0]; c["power_w"] != 162.8 || len(c["processes"].([]any)) != 0 {
		t.Errorf("A3 NPU 0 chip 0: %v", c)
	}
}

// TestDevicesNPUSMIPath: the flag beats the environment, which beats PATH.
func TestDevicesNPUSMIPath(t *testing.T) {
	x8 := fixture.NPUSMIStandIn(t, "npu-smi/npu-smi-info-910B3x8-24.1.rc1.txt")
	a3 := fixture.NPUSMIStandIn(t, "npu-smi/npu-smi-info-A3-2chip-25.2.0.txt")
	t.Setenv("PATH", t.TempDir())
	t.Setenv(envNPUSMI, filepath.Join(a3, "npu-smi"))
	code, out, _ := captureRun(t, "devices")
	if code != 0 || !strings.Contains(out, "npu-smi 25.2.0 (") {
		t.Errorf("env: exit %d\n%s", code, out)
	}
	code, out, _ = captureRun(t, "devices", "--npu-smi", filepath.Join(x8, "npu-smi"))
	if code != 0 || !strings.Contains(out, "npu-smi 24.1.rc1.b030 (") {
		t.Errorf("flag: exit %d\n%s", code, out)
	}
}

func TestDevicesWithoutNPUSMI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(envNPUSMI, "")
	code, out, errOut := captureRun(t, "devices")
	if code != exitFail || out != "" ||
		!strings.HasPrefix(errOut, "npumon devices: npu-smi not found: ") || !strings.Contains(errOut, "--npu-smi or NPUMON_NPU_SMI") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// --sim still works, and says what it is
	code, out, _ = captureRun(t, "devices", "--sim")
	if code != 0 || !strings.Contains(out, "simulated ACL runtime") {
		t.Errorf("--sim: exit %d\n%s", code, out)
	}
}

func TestDevicesBadNPUSMIOutput(t *testing.T) {
	dir := standInOnPath(t, "npu-smi-info-910B2C-23.0.2.1-procs.txt")
	b, err := os.ReadFile(filepath.Join(dir, "info.txt"))
	if err != nil {
		t.Fatal(err)
	}
	fixture.SetNPUSMIOutput(t, dir, "text:"+strings.Replace(string(b), "HBM-Usage(MB)", "HBM-Usage(GB)", 1))
	code, out, errOut := captureRun(t, "devices", "--json")
	if code != exitFail || out != "" || !strings.HasPrefix(errOut, "npumon devices: npu-smi info: line 5: unknown second header row: ") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if err := os.WriteFile(filepath.Join(dir, "fail"), []byte("dcmi module initialize failed. ret is -8005\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = captureRun(t, "devices")
	if code != exitFail || errOut != "npumon devices: npu-smi info: exit status 3: dcmi module initialize failed. ret is -8005\n" {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestDevicesIntervalErrors(t *testing.T) {
	standInOnPath(t, "npu-smi-info-910B2C-23.0.2.1-procs.txt")
	t.Setenv(envNPUSMIInterval, "soon")
	if code, _, errOut := captureRun(t, "devices"); code != exitUsage || !strings.Contains(errOut, "NPUMON_NPU_SMI_INTERVAL=\"soon\"") {
		t.Errorf("bad env: exit %d, stderr %q", code, errOut)
	}
	t.Setenv(envNPUSMIInterval, "")
	if code, _, errOut := captureRun(t, "devices", "--npu-smi-interval", "1ms"); code != exitUsage || !strings.Contains(errOut, "between 100ms and 1h") {
		t.Errorf("1ms: exit %d, stderr %q", code, errOut)
	}
}
