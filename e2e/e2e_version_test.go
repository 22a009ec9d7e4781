//go:build e2e

package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestVersionShape: the binary `make build` made reports a semantic version
// (X.Y.Z, or the base version plus the commit as build metadata), the shape
// docs/cli.md describes, never a bare commit hash.
func TestVersionShape(t *testing.T) {
	out, err := exec.Command(npumonBin(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^npumon [0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	if s := strings.TrimSuffix(string(out), "\n"); !re.MatchString(s) {
		t.Fatalf("npumon version printed %q, want %s", s, re)
	}
}
