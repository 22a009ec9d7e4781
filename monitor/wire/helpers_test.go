package wire

import (
	"os"
	"testing"
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
