package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const whatifTrace = "../../replay/whatif/testdata/fragmentation.pickle"

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
	code, out, errOut := captureRun(t, "whatif", "--json", "--device-mem", "2GiB", "--conf", "expandable_segments:True", whatifTrace)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		Flavour string `json:"flavour"`
		Devices []struct {
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
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	d := res.Devices[0]
	if res.Flavour != "npu" || d.DeviceMem != 2<<30 || d.DeviceMemSource != "given (--device-mem)" {
		t.Errorf("flavour %s, device mem %d (%s)", res.Flavour, d.DeviceMem, d.DeviceMemSource)
	}
	// On 2 GiB the 200 MiB request fits even without expandable segments.
	if len(d.Runs) != 2 || d.Runs[0].OOMs != 0 || d.Runs[1].Name != "expandable_segments:True" || len(d.Runs[0].Reserved) != 12 {
		t.Errorf("runs %+v", d.Runs)
	}
}

func TestWhatifErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"whatif", whatifTrace, "--conf", "max_split_size_mb:10"}, "must be >= 20"},
		{[]string{"whatif", whatifTrace, "--conf", "bogus_key:1"}, "bogus_key"},
		{[]string{"whatif", whatifTrace, "--device-mem", "lots"}, "--device-mem"},
		{[]string{"whatif", whatifTrace, "--flavour", "rocm"}, "--flavour"},
		{[]string{"whatif", "/nonexistent/x.pickle"}, "/nonexistent/x.pickle"},
		{[]string{"whatif"}, "takes 1 argument"},
	} {
		code, _, errOut := captureRun(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
