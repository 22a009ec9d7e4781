package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/npumon/npumon/acl"
)

func TestDevicesSimTable(t *testing.T) {
	code, out, errOut := captureRun(t, "devices", "--sim", "--devices", "3")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	// top, title, rule, header, rule, then a row and a rule per device
	if len(lines) != 5+2*3 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[1], "3 device(s)") || !strings.Contains(lines[3], "HBM-Usage(MB)") {
		t.Errorf("title/header:\n%s", out)
	}
	for i, id := range []string{"0", "1", "2"} {
		row := strings.Fields(strings.ReplaceAll(lines[5+2*i], "|", " "))
		want := []string{id, "Ascend910B3", "OK", "0", "/", "62464", "0"}
		if strings.Join(row, " ") != strings.Join(want, " ") {
			t.Errorf("row %d = %q, want %q", i, row, want)
		}
	}
	width := len(lines[0])
	for i, l := range lines {
		if len(l) != width {
			t.Errorf("line %d is %d wide, the table %d: %q", i, len(l), width, l)
		}
	}
}

func TestDevicesSimDefaultIsOneDevice(t *testing.T) {
	code, out, _ := captureRun(t, "devices", "--sim")
	if code != 0 || strings.Count(out, "Ascend910B3") != 1 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestDevicesSimJSON(t *testing.T) {
	var got []map[string]any
	runJSON(t, &got, "devices", "--sim", "--devices", "2", "--json")
	if len(got) != 2 {
		t.Fatalf("%d objects", len(got))
	}
	for i, o := range got {
		if len(o) != 5 || o["id"] != float64(i) || o["name"] != "Ascend910B3" ||
			o["hbm_total_bytes"] != float64(61*acl.GiB) || o["hbm_used_bytes"] != float64(0) || o["streams"] != float64(0) {
			t.Errorf("object %d = %v", i, o)
		}
	}
}

// TestDevicesSimRendersUsage renders devices that hold memory and streams.
func TestDevicesSimRendersUsage(t *testing.T) {
	rt := acl.NewRuntime(acl.Config{Devices: []acl.DeviceSpec{{}, {Name: "Ascend910B4", HBMBytes: 32 * acl.GiB, SystemReserved: -1}}})
	d0, _ := rt.Device(0)
	d1, _ := rt.Device(1)
	if _, err := d0.MallocAlign32(100*acl.MiB, acl.HugeFirst); err != nil {
		t.Fatal(err)
	}
	if _, err := d1.Malloc(1, acl.HugeFirst); err != nil { // 64 B shows as 1 MB
		t.Fatal(err)
	}
	d0.CreateStream()
	d0.CreateStream()
	infos := []acl.DeviceInfo{d0.Info(), d1.Info()}

	var tbl bytes.Buffer
	writeDevicesTable(&tbl, infos)
	var rows []string
	for _, l := range strings.Split(tbl.String(), "\n") {
		if strings.HasPrefix(l, "| ") && !strings.Contains(l, "npumon") && !strings.Contains(l, "NPU") {
			rows = append(rows, strings.Join(strings.Fields(strings.ReplaceAll(l, "|", " ")), " "))
		}
	}
	want := []string{"0 Ascend910B3 OK 100 / 62464 2", "1 Ascend910B4 OK 1 / 32768 0"}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows %q, want %q:\n%s", rows, want, tbl.String())
	}
	var js bytes.Buffer
	if err := writeDevicesJSON(&js, infos); err != nil {
		t.Fatal(err)
	}
	var got []deviceJSON
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	wantJS := []deviceJSON{{0, "Ascend910B3", 61 * acl.GiB, 100 * acl.MiB, 2}, {1, "Ascend910B4", 32 * acl.GiB, 64, 0}}
	for i := range wantJS {
		if got[i] != wantJS[i] {
			t.Errorf("device %d: %+v, want %+v", i, got[i], wantJS[i])
		}
	}
}

func TestDevicesUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"devices", "--sim", "--devices", "0"},
		{"devices", "--sim", "--devices", "65"},
		{"devices", "--sim", "--devices", "x"},
		{"devices", "--devices", "2"}, // --devices without --sim
		{"devices", "extra"},
		{"devices", "--bogus"},
	} {
		code, out, errOut := captureRun(t, args...)
		if code != 2 || !strings.Contains(errOut, "npumon:") || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
}
