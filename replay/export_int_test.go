package replay

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportWideIntegers: addresses and stream handles above 2^63−1 are
// written as 8-byte LONG1 (the int64 with the same bits, as torch's own
// dumps carry them), never as the 9-byte long PyTorch's memory viewer
// rejects; Python reads the signed value and npumon reads the same uint64
// back.
func TestExportWideIntegers(t *testing.T) {
	c := mustDecode(t, "testdata/wide_addr.pickle")
	c.Snapshot.Segments[0].Stream = 0xFFFF_8000_0000_1234 // a handle with the top bit set
	var b bytes.Buffer
	if err := WritePickle(&b, c.Snapshot, ExportDict); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(bytes.NewReader(b.Bytes()), int64(b.Len()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a := back.Snapshot.Segments[0].Address; a != 1<<63+0x1000 {
		t.Errorf("address read back %#x, want 2^63+0x1000", a)
	}
	if s := back.Snapshot.Segments[0].Stream; s != 0xFFFF_8000_0000_1234 {
		t.Errorf("stream read back %#x", s)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed to check the export with Python's pickletools")
	}
	out := filepath.Join(t.TempDir(), "wide.pickle")
	if err := os.WriteFile(out, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	// The viewer's unpickler accepts LONG1 of ≤ 8 bytes only (MemoryViz.js
	// "Unsupported number bigger than 8 bytes") and no LONG4.
	script := `
import pickle, pickletools, sys
data = open(sys.argv[1], "rb").read()
for op, arg, pos in pickletools.genops(data):
    if op.name == "LONG4":
        sys.exit("LONG4 at %d" % pos)
    if op.name == "LONG1":
        n = data[pos + 1]
        if n > 8:
            sys.exit("LONG1 of %d bytes at %d" % (n, pos))
d = pickle.loads(data)
seg = d["segments"][0]
assert seg["address"] == (1 << 63) + 0x1000 - (1 << 64), seg["address"]
assert seg["stream"] == 0xFFFF800000001234 - (1 << 64), seg["stream"]
print("ok")
`
	res, err := exec.Command(py, "-c", script, out).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(res), "ok") {
		t.Fatalf("python: %v\n%s", err, res)
	}
}
