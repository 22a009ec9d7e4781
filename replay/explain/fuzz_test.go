package explain

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/replay"
)

// FuzzExplain: whatever decodes is explained (without the what-if) and its
// holders and diffs computed without a panic.
func FuzzExplain(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/*.pickle")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil && len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := replay.Decode(bytes.NewReader(data), int64(len(data)), replay.Options{})
		if err != nil {
			return
		}
		if _, err := Explain(context.Background(), c, Options{NoWhatIf: true, MaxOOMs: 4}); err != nil {
			t.Fatalf("explain of a decoded file: %v", err)
		}
		for _, dev := range c.Snapshot.Devices() {
			d, err := NewDevice(c, dev, nil)
			if err != nil {
				continue
			}
			for _, by := range Bys {
				if _, err := d.Holders("peak", d.Grouper(by), 3); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := DiffMoments(d, "#-1", "end", &Grouper{By: ByCallsite}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
