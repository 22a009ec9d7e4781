package replay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: arbitrary bytes never panic or hang the decoder; whatever
// decodes also survives stats, a timeline walk, and an export round trip
// that keeps the model (SameModel: stack ids may be renumbered, the frames
// every record names may not change).
func FuzzDecode(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.pickle")
	js, _ := filepath.Glob("testdata/*.json")
	for _, p := range append(seeds, js...) {
		if data, err := os.ReadFile(p); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(bytes.NewReader(data), int64(len(data)), Options{})
		if err != nil {
			return
		}
		if _, err := ComputeStats(c, StatsOptions{}); err != nil {
			t.Fatalf("stats of a decoded snapshot: %v", err)
		}
		for _, d := range c.Snapshot.Devices() {
			if tl, err := NewTimeline(c.Snapshot, d); err == nil && len(tl.Entries) > 0 {
				tl.StateAfter(len(tl.Entries) / 2)
			}
		}
		var b bytes.Buffer
		if err := WritePickle(&b, c.Snapshot, ExportDict); err != nil {
			t.Fatal(err)
		}
		c2, err := Decode(bytes.NewReader(b.Bytes()), int64(b.Len()), Options{})
		if err != nil {
			t.Fatalf("re-decode of our own export: %v", err)
		}
		if !SameModel(c.Snapshot, c2.Snapshot) {
			t.Fatalf("export round trip changed the model")
		}
	})
}
