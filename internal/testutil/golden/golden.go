// Package golden is the tests' one way to compare output with a golden
// file and to refresh it. Every golden test takes the same flag, -update:
// `go test ./PKG/ -run TestX -update` rewrites that package's golden files
// instead of failing on a difference (check the diff is what was meant);
// `make golden` refreshes all of them, the Python-reference goldens of
// replay/testdata included. Test-only.
//
// The flag is the one github.com/charmbracelet/x/exp/golden registers,
// which teatest's output goldens also read: importing this package
// registers it, so a package's tests have exactly one -update whichever of
// the two they use.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/charmbracelet/x/exp/golden" // registers -update
)

// Update reports whether the tests run with -update (rewrite the goldens).
func Update() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Path is the golden file of the running test or subtest: testdata/NAME.golden,
// NAME its full name (the file x/exp/golden.RequireEqual uses).
func Path(t testing.TB) string {
	return filepath.Join("testdata", t.Name()+".golden")
}

// Check compares got with the golden file at path and fails the test at
// the first line where they differ (got is shown in full); with -update it
// writes got to path first (creating its directory). Line endings are
// compared as \n.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	got = bytes.ReplaceAll(got, []byte("\r\n"), []byte("\n"))
	if Update() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	want = bytes.ReplaceAll(want, []byte("\r\n"), []byte("\n"))
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run the test with -update to accept the new output): %s\ngot:\n%s",
			path, FirstDiff(string(want), string(got)), got)
	}
}

// FirstDiff describes the first line where want and got differ ("" when
// they are equal).
func FirstDiff(want, got string) string {
	if want == got {
		return ""
	}
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range min(len(wl), len(gl)) {
		if wl[i] != gl[i] {
			return fmt.Sprintf("line %d:\n want %q\n got  %q", i+1, wl[i], gl[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(gl), len(wl))
}
