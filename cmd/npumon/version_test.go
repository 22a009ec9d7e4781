package main

import (
	"bytes"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersionNamesCommit: `npumon version` names the commit the ldflags
// carry (make build, make dist), with its time and whether the tree was
// dirty, and the platform; its first line stays the bare version.
func TestVersionNamesCommit(t *testing.T) {
	defer func(c, ct, m string) { commit, commitTime, modified = c, ct, m }(commit, commitTime, modified)
	commit, commitTime, modified = "9b9e4e9c0ffee0000000000000000000000000ab", "2026-12-02T01:02:03+01:00", "true"
	var buf bytes.Buffer
	writeVersion(&buf)
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{
		"npumon " + version,
		"commit 9b9e4e9c0ffee0000000000000000000000000ab 2026-12-02T00:02:03Z (with uncommitted changes)",
		"built with " + runtime.Version() + " for " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("version printed\n%s\nwant\n%s", buf.String(), strings.Join(want, "\n"))
	}
	if !regexp.MustCompile(versionPattern).MatchString(strings.TrimPrefix(lines[0], "npumon ")) {
		t.Fatalf("first line %q is not a version", lines[0])
	}

	modified = ""
	buf.Reset()
	writeVersion(&buf)
	if l := strings.Split(buf.String(), "\n")[1]; l != "commit 9b9e4e9c0ffee0000000000000000000000000ab 2026-12-02T00:02:03Z" {
		t.Fatalf("clean tree: commit line %q", l)
	}

	// Without ldflags a test binary has no VCS stamp either: the line says so.
	commit, commitTime = "", ""
	buf.Reset()
	writeVersion(&buf)
	if l := strings.Split(buf.String(), "\n")[1]; !strings.HasPrefix(l, "commit ") {
		t.Fatalf("no ldflags: second line %q", l)
	}
}
