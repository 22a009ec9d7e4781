package segmap

import (
	"fmt"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/replay/frames"
)

// Frame filters of torch's memory_viz (docs/reference/snapshot-format.md §6.6):
// interpreter and dispatcher frames that say nothing about the caller.
var (
	dropNames = []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp",
		"_start", "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
	dropFiles = []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
		"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}
)

func keepFrame(f snapshot.Frame) bool {
	for _, s := range dropNames {
		if strings.Contains(f.Name, s) {
			return false
		}
	}
	for _, s := range dropFiles {
		if strings.Contains(f.Filename, s) {
			return false
		}
	}
	return true
}

// StackLines formats a stack innermost first as "function  …/dir/file.py:line"
// in at most width cells (the path shortened from the left, so the file and
// line stay; width ≤ 0: whole), dropping filtered frames, folding each run
// of library/native frames around the call site into one line
// (explain.StackText) and collapsing runs of three or more identical lines
// into the first plus "<repeats N times>" (runs of two are kept).
func StackLines(st snapshot.Stack, width int) []string {
	var kept snapshot.Stack
	for _, f := range st {
		if keepFrame(f) {
			kept = append(kept, f)
		}
	}
	lines := explain.StackText(&frames.Rules{}, kept, width)
	var out []string
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		n := j - i
		switch {
		case n >= 3:
			out = append(out, lines[i], fmt.Sprintf("<repeats %d times>", n-1))
		default:
			out = append(out, lines[i:j]...)
		}
		i = j
	}
	return out
}
