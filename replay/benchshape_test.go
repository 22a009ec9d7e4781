package replay

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestBenchShapesMatchReference: the benchmark generator's two shapes
// (distinct frames lists per allocation, as in real dumps, and shared stack
// lists), written by Python's pickle at 10,000 entries, give the stats of
// the Python reference (ref_stats.py over pickle.load), streamed and in
// memory, and the same interned stacks either way.
func TestBenchShapesMatchReference(t *testing.T) {
	py := fixture.Tool(t, "python3", "python3")
	for _, shape := range []string{"distinct", "shared"} {
		t.Run(shape, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), shape+".pickle")
			if out, err := exec.Command(py, "testdata/gen_bench.py", path, "10000", shape).CombinedOutput(); err != nil {
				t.Fatalf("gen_bench.py: %v\n%s", err, out)
			}
			ref, err := exec.Command(py, "testdata/ref_stats.py", path).Output()
			if err != nil {
				t.Fatalf("ref_stats.py: %v", err)
			}
			var want map[string]any
			if err := json.Unmarshal(ref, &want); err != nil {
				t.Fatal(err)
			}
			c := mustDecode(t, path)
			st, err := ComputeStats(c, StatsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			fs, err := StatsFile(path, StatsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for name, s := range map[string]*Stats{"ComputeStats": st, "StatsFile": fs} {
				s.Path = ""
				if got := toMap(t, s); !reflect.DeepEqual(got, want) {
					gj, _ := json.MarshalIndent(got, "", "  ")
					t.Errorf("%s differs from the Python reference\n got: %s\nwant: %s", name, gj, ref)
				}
			}
			// Every entry's stack is its frames, in order, as pickle.load reads them.
			dump := "import pickle,sys,json\nd=pickle.load(open(sys.argv[1],'rb'))\n" +
				"json.dump([[[f['filename'],f['line'],f['name']] for f in e['frames']] for e in d['device_traces'][0]],sys.stdout)"
			out, err := exec.Command(py, "-c", dump, path).Output()
			if err != nil {
				t.Fatalf("frames dump: %v", err)
			}
			var frames [][][3]any
			if err := json.Unmarshal(out, &frames); err != nil {
				t.Fatal(err)
			}
			tr := c.Snapshot.DeviceTraces[0]
			if len(frames) != len(tr) {
				t.Fatalf("%d entries, Python has %d", len(tr), len(frames))
			}
			for i, e := range tr {
				st := c.Snapshot.Stacks[e.Frames]
				if len(st) != len(frames[i]) {
					t.Fatalf("entry %d: %d frames, Python has %d", i, len(st), len(frames[i]))
				}
				for j, f := range st {
					w := frames[i][j]
					if f.Filename != w[0] || float64(f.Line) != w[1] || f.Name != w[2] {
						t.Fatalf("entry %d frame %d: %+v, Python has %v", i, j, f, w)
					}
				}
			}
		})
	}
}
