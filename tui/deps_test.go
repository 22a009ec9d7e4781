package tui

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportClosure: the terminal UI links neither the allocator algorithm
// (nor the simulated runtime under it), nor SQLite, nor fsnotify. It reads
// the snapshot model (allocator/snapshot) and the Store; what needs the
// heavy packages (the what-if simulation, loading files, watching
// directories) is handed in by cmd/npumon through Options.
func TestImportClosure(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out, err := exec.Command(goBin, "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./tui/...: %v\n%s", err, out)
	}
	forbidden := func(pkg string) bool {
		for _, p := range []string{"github.com/npumon/npumon/acl", "github.com/npumon/npumon/allocator",
			"github.com/npumon/npumon/profiler", "github.com/npumon/npumon/monitor/watch",
			"github.com/npumon/npumon/replay/whatif/sim", "modernc.org/sqlite", "github.com/fsnotify/fsnotify"} {
			if pkg == p || strings.HasPrefix(pkg, p+"/") && p != "github.com/npumon/npumon/allocator" {
				return true
			}
		}
		return false
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list -deps listed %d packages:\n%s", len(deps), out)
	}
	seen := map[string]bool{}
	for _, d := range deps {
		seen[d] = true
		if forbidden(d) {
			t.Errorf("the TUI's import closure holds %s", d)
		}
	}
	if !seen["github.com/npumon/npumon/allocator/snapshot"] {
		t.Error("the TUI's import closure lacks allocator/snapshot: is go list reading the right module?")
	}
}
