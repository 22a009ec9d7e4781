package attach

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// filepathTemp makes a short temporary directory (Unix socket paths are
// limited to ~108 bytes, t.TempDir can exceed that).
func filepathTemp() (string, error) { return os.MkdirTemp("", "npm") }

func removeAll(dir string) { os.RemoveAll(dir) }

// shortSock returns a Unix socket path short enough for sun_path.
func shortSock(t *testing.T) string {
	t.Helper()
	dir, err := filepathTemp()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(dir) })
	return filepath.Join(dir, "p.sock")
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
