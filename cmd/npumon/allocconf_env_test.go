package main

import (
	"strings"
	"testing"
)

// TestAllocConfEnvBothSet: demo and sim refuse to start when both
// PYTORCH_NPU_ALLOC_CONF and its alias PYTORCH_ALLOC_CONF are set, as
// torch_npu does; the alias alone is read (a bad value names the option).
func TestAllocConfEnvBothSet(t *testing.T) {
	t.Run("both", func(t *testing.T) {
		t.Setenv("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True")
		t.Setenv("PYTORCH_ALLOC_CONF", "expandable_segments:True")
		code, _, errOut := captureRun(t, "demo", "--headless", "1ms")
		if code != exitUsage || !strings.Contains(errOut, "please set only one of them") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("alias alone", func(t *testing.T) {
		t.Setenv("PYTORCH_ALLOC_CONF", "no_such_option:1")
		code, _, errOut := captureRun(t, "demo", "--headless", "1ms")
		if code == exitOK || !strings.Contains(errOut, "no_such_option") {
			t.Errorf("exit %d, stderr %q: the alias was not read", code, errOut)
		}
	})
}
