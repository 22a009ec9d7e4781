package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsFlagLoopback: --metrics :0 listens on the loopback address and
// says so, with no warning. (Nothing serves the socket: attach exits 1.)
func TestMetricsFlagLoopback(t *testing.T) {
	code, _, errOut := captureRun(t, "attach", "unix:"+filepath.Join(t.TempDir(), "none.sock"), "--headless", "200ms", "--metrics", ":0")
	if code != exitFail || !strings.Contains(errOut, "npumon attach: metrics on http://127.0.0.1:") || strings.Contains(errOut, "warning") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestMetricsFlagExposed: an address other hosts can reach is served, with
// a warning.
func TestMetricsFlagExposed(t *testing.T) {
	code, _, errOut := captureRun(t, "attach", "unix:"+filepath.Join(t.TempDir(), "none.sock"), "--headless", "200ms", "--metrics", "0.0.0.0:0")
	if code != exitFail || !strings.Contains(errOut, "npumon attach: warning: metrics on 0.0.0.0:") ||
		!strings.Contains(errOut, "reachable from other hosts") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestMetricsFlagBad(t *testing.T) {
	for _, args := range [][]string{
		{"attach", "unix:/nonexistent.sock", "--headless", "100ms", "--metrics", "9464"},
		{"exporter", "--metrics", "127.0.0.1", "unix:/nonexistent.sock"},
		{"exporter"},
	} {
		code, _, errOut := captureRun(t, args...)
		if code != exitUsage || !strings.Contains(errOut, "npumon: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
