package replay

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestRoundTripVariants: every generated variant survives decode → export →
// decode unchanged (pool ids, wide addresses, histories, unknown actions).
func TestRoundTripVariants(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.pickle")
	js, _ := filepath.Glob("testdata/*.json")
	for _, f := range append(files, js...) {
		if strings.HasPrefix(filepath.Base(f), "bad_") {
			continue
		}
		c := mustDecode(t, f)
		var b bytes.Buffer
		if err := WritePickle(&b, c.Snapshot, ExportDict); err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(&b, int64(b.Len()), Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if c.Schema != SchemaTorch113 && c2.Schema != c.Schema {
			t.Errorf("%s: schema %s after export, was %s", f, c2.Schema, c.Schema)
		}
		if !reflect.DeepEqual(c.Snapshot, c2.Snapshot) {
			t.Errorf("%s: export round trip changed the model", f)
		}
	}
}

// TestExportLoadsInPython: Python's own pickle loads our protocol-4 export
// of the newest real fixture and finds the original content (the model
// drops only empty user_metadata strings).
func TestExportLoadsInPython(t *testing.T) {
	py := fixture.Tool(t, "python3", "python3")
	src := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	c := mustDecode(t, src)
	out := filepath.Join(t.TempDir(), "export.pickle")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := WritePickle(f, c.Snapshot, ExportDict); err != nil {
		t.Fatal(err)
	}
	f.Close()
	script := `
import pickle, sys
a = pickle.load(open(sys.argv[1], "rb"))
b = pickle.load(open(sys.argv[2], "rb"))
with open(sys.argv[2], "rb") as f:
    assert f.read(2) == b"\x80\x04", "not protocol 4"
for tr in a["device_traces"]:
    for e in tr:
        if e.get("user_metadata") == "":
            del e["user_metadata"]
assert a == b, "content differs"
print("ok", len(b["segments"]), sum(len(t) for t in b["device_traces"]))
`
	res, err := exec.Command(py, "-c", script, src, out).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(res), "ok 216 5163") {
		t.Fatalf("python: %v\n%s", err, res)
	}
}
