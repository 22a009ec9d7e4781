package benchcpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// snapshots1M are the generated 1,000,000-entry snapshots `make bench-data`
// writes under testdata/bench: "distinct" is shaped like real dumps (a
// frames list object per allocation), "shared" refers to 400 shared stack
// lists.
var snapshots1M = []struct{ name, file string }{
	{"distinct", "snapshot_1m_distinct.pickle"},
	{"shared", "snapshot_1m.pickle"},
}

// EachSnapshot1M runs fn as a sub-benchmark per generated snapshot,
// reporting the file's size per op and allocations; a missing file skips
// its case.
func EachSnapshot1M(b *testing.B, fn func(b *testing.B, path string)) {
	dir := filepath.Join(filepath.Dir(fixture.Root(b)), "bench")
	for _, f := range snapshots1M {
		b.Run(f.name, func(b *testing.B) {
			path := filepath.Join(dir, f.file)
			fi, err := os.Stat(path)
			if err != nil {
				b.Skip("run make bench-data first")
			}
			b.SetBytes(fi.Size())
			b.ReportAllocs()
			fn(b, path)
		})
	}
}

// PythonPickleLoad is the baseline of the decoding benchmarks: CPython's
// C-accelerated pickle.load of path in a child process per b.Loop
// iteration (interpreter start-up included, as for an npumon command). It
// returns the children's CPU time per op.
func PythonPickleLoad(b *testing.B, path string) time.Duration {
	py := fixture.Tool(b, "python3", "python3")
	var cpu time.Duration
	for b.Loop() {
		cmd := exec.Command(py, "-c", "import pickle,sys\nwith open(sys.argv[1],'rb') as f: pickle.load(f)", path)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	return cpu / time.Duration(b.N)
}
