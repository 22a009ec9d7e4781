package replay

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// A capture whose traces come before its segments meets its stacks in the
// other order than the export, which writes segments first: the round
// trip renumbers the stack ids, and SameModel (frame contents) still holds.
func TestRoundTripRenumbersStacks(t *testing.T) {
	py := fixture.Tool(t, "python3", "python3")
	p := filepath.Join(t.TempDir(), "traces_first.pickle")
	src := `import pickle, sys
a = [{'filename': 'a.py', 'line': 1, 'name': 'fa'}]
b = [{'filename': 'b.py', 'line': 2, 'name': 'fb'}]
snap = {'device_traces': [[{'action': 'alloc', 'addr': 4096, 'size': 512, 'stream': 0, 'frames': a}]],
        'segments': [{'device': 0, 'address': 4096, 'total_size': 2097152, 'allocated_size': 512, 'active_size': 512,
                      'requested_size': 512, 'stream': 0, 'segment_type': 'small', 'frames': b,
                      'blocks': [{'address': 4096, 'size': 512, 'requested_size': 512, 'state': 'active_allocated', 'frames': b},
                                 {'address': 4608, 'size': 2096640, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}]}
with open(sys.argv[1], 'wb') as f:
    pickle.dump(snap, f, protocol=4)
`
	if out, err := exec.Command(py, "-c", src, p).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	data, _ := os.ReadFile(p)
	c, err := Decode(bytes.NewReader(data), int64(len(data)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WritePickle(&b, c.Snapshot, ExportDict); err != nil {
		t.Fatal(err)
	}
	c2, err := Decode(bytes.NewReader(b.Bytes()), int64(b.Len()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(c.Snapshot.Segments, c2.Snapshot.Segments) {
		t.Fatal("ids kept: this input no longer shows the renumbering SameModel exists for")
	}
	if !SameModel(c.Snapshot, c2.Snapshot) {
		t.Fatal("round trip changed the frames a record names")
	}
	// a real change of frames is a different model
	c2.Snapshot.Segments[0].Blocks[0].Frames = c2.Snapshot.DeviceTraces[0][0].Frames
	if SameModel(c.Snapshot, c2.Snapshot) {
		t.Fatal("SameModel missed a block naming other frames")
	}
}
