//go:build e2e

package e2e

import (
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersionShape: the binary `make build` made reports a semantic version
// (X.Y.Z, or the base version plus the commit as build metadata) on its
// first line, the shape docs/cli.md describes, never a bare commit hash;
// then the full commit it was built from and its platform.
func TestVersionShape(t *testing.T) {
	out, err := exec.Command(npumonBin(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	re := regexp.MustCompile(`^npumon [0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	if len(lines) != 3 || !re.MatchString(lines[0]) {
		t.Fatalf("npumon version printed %q, want a first line %s and two more", out, re)
	}
	if !regexp.MustCompile(`^commit ([0-9a-f]{40}( \S+Z)?( \(with uncommitted changes\))?|unknown .*)$`).MatchString(lines[1]) {
		t.Errorf("second line %q does not name a commit", lines[1])
	}
	if want := "for " + runtime.GOOS + "/" + runtime.GOARCH; !strings.HasPrefix(lines[2], "built with go") || !strings.HasSuffix(lines[2], want) {
		t.Errorf("third line %q, want built with go… %s", lines[2], want)
	}
}
