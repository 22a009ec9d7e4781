package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/npumon/npumon/monitor/workload"
)

// captureRun runs the CLI with args and returns exit code, stdout and stderr.
func captureRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	oldOut, oldErr := os.Stdout, os.Stderr
	ro, wo, _ := os.Pipe()
	re, we, _ := os.Pipe()
	os.Stdout, os.Stderr = wo, we
	var out, errb bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&out, ro); done <- struct{}{} }()
	go func() { io.Copy(&errb, re); done <- struct{}{} }()
	code := run(args)
	wo.Close()
	we.Close()
	<-done
	<-done
	os.Stdout, os.Stderr = oldOut, oldErr
	return code, out.String(), errb.String()
}

// runJSON runs the CLI with args, which must exit 0, and decodes its
// stdout into v.
func runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errOut := captureRun(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: output is not JSON: %v\n%s", args, err, out)
	}
}

// finishedWorkload runs the simulated training job of cfg to its end.
func finishedWorkload(t *testing.T, cfg workload.Config) *workload.Workload {
	t.Helper()
	w, err := workload.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestVersion(t *testing.T) {
	code, out, _ := captureRun(t, "version")
	if code != 0 || !strings.HasPrefix(out, "npumon ") {
		t.Fatalf("version: code %d, out %q", code, out)
	}
	code, out, _ = captureRun(t, "--version")
	if code != 0 || !strings.Contains(out, version) {
		t.Fatalf("--version: code %d, out %q", code, out)
	}
}

func TestVersionFormat(t *testing.T) {
	re := regexp.MustCompile(versionPattern)
	for _, v := range []string{version, "0.1.0-dev+e16c67d", "0.1.0-dev+e16c67d.dirty", "1.2.0"} {
		if !re.MatchString(v) {
			t.Errorf("%q does not match %s", v, versionPattern)
		}
	}
	for _, v := range []string{"e16c67d", "e16c67d-dirty", "dev", "v1.2.0", ""} {
		if re.MatchString(v) {
			t.Errorf("%q matches %s", v, versionPattern)
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-flag"},
		{"no-such-command"},
		{"version", "extra"},
		{"version", "--bogus"},
	} {
		code, _, errOut := captureRun(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
		if !strings.Contains(errOut, "npumon:") {
			t.Errorf("%v: stderr %q lacks an error line", args, errOut)
		}
	}
}
