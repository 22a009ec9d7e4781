package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Broken input and bad flags are refused on the command line with one line
// and exit 2, before any terminal UI opens (a test that reached the UI would
// hang here without a terminal).
func TestReplayRefusesBeforeTheUI(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "bad.pickle")
	if err := os.WriteFile(garbage, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(fixture2026(t))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.pickle")
	if err := os.WriteFile(truncated, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"garbage", []string{"replay", garbage}, "bad.pickle: not a memory snapshot: offset 0"},
		{"truncated", []string{"replay", truncated}, "truncated.pickle: offset"},
		{"missing", []string{"replay", filepath.Join(dir, "none.pickle")}, "none.pickle"},
		{"device", []string{"replay", "--device", "5", fixture2026(t)}, "--device 5: the input has device(s) [0]"},
		{"speed high", []string{"replay", "--speed", "5000", fixture2026(t)}, "--speed must be between 0.01 and 1024, got 5000"},
		{"speed low", []string{"replay", "--speed", "0.001", fixture2026(t)}, "--speed must be between"},
		{"speed zero", []string{"replay", "--speed", "0", fixture2026(t)}, "--speed must be between"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := captureRun(t, tc.args...)
			if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tc.want)
			}
		})
	}
	// The ends of the range are accepted.
	for _, speed := range []string{"0.01", "1024"} {
		var s replaySummaryJSON
		runJSON(t, &s, "replay", "--speed", speed, "--headless", "1ms", fixture2026(t))
		if s.Entries != 5163 {
			t.Errorf("--speed %s: summary %+v", speed, s)
		}
	}
}

// check: SI sizes are powers of 1000 and IEC ones powers of 1024, exactly
// (the fixture's peak active is 13,923,997,700 B: above 13.9 GB, below 13.93 GB
// and 12.97 GiB); a check without any limit is a usage error.
func TestCheckSizeUnitsAndLimits(t *testing.T) {
	for _, tc := range []struct {
		limit string
		code  int
	}{
		{"13.9GB", exitFail}, {"13.93GB", exitOK}, {"13923997700", exitOK}, {"13923997699", exitFail},
		{"12.96GiB", exitFail}, {"12.97GiB", exitOK},
	} {
		t.Run(tc.limit, func(t *testing.T) {
			code, _, errOut := captureRun(t, "check", fixture2026(t), "--max-peak", tc.limit)
			if code != tc.code {
				t.Errorf("--max-peak %s: exit %d (%s), want %d", tc.limit, code, errOut, tc.code)
			}
		})
	}
	code, _, errOut := captureRun(t, "check", fixture2026(t))
	if code != exitUsage || !strings.Contains(errOut, "check needs at least one limit") {
		t.Errorf("check without limits: exit %d, %q", code, errOut)
	}
	// An inactive-fraction violation shows the digits that tell it from its limit.
	code, _, errOut = captureRun(t, "check", fixture2026(t), "--max-inactive-pct", "90.28")
	if code != exitFail || !strings.Contains(errOut, "inactive fraction 90.284% ") || !strings.Contains(errOut, "exceeds --max-inactive-pct 90.280%") {
		t.Errorf("fragmentation violation: exit %d, %q", code, errOut)
	}
}
