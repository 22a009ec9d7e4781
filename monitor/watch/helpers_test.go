package watch

import (
	"os"
	"testing"
	"time"
)

// filepathTemp makes a short temporary directory (Unix socket paths are
// limited to ~108 bytes, t.TempDir can exceed that).
func filepathTemp() (string, error) { return os.MkdirTemp("", "npm") }

func removeAll(dir string) { os.RemoveAll(dir) }

func fileMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
