package store

import (
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/explain"
)

// TestCategoriesAgreeWithExplain: the holders by category the TUI reads
// from a Store are those `npumon holders --by category` computes from the
// file, at the end and at the peak of every capture file.
func TestCategoriesAgreeWithExplain(t *testing.T) {
	for _, path := range captureFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c, err := replay.DecodeFile(path, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			st := New(Options{CheckpointEvery: 97})
			if err := st.IngestSnapshot(c.Snapshot); err != nil {
				t.Fatal(err)
			}
			for _, dev := range st.Devices() {
				d, err := explain.NewDevice(c, dev, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, at := range []string{"end", "peak"} {
					h, err := d.Holders(at, d.Grouper(explain.ByCategory), 0)
					if err != nil {
						t.Fatal(err)
					}
					g := &explain.Grouper{By: explain.ByCategory, Stack: st.Stack, Category: explain.CategoryOf(st.Categories(dev))}
					live := st.LiveAtSeq(dev, int64(h.At.Index+1))
					got := map[string]int64{}
					for _, gr := range g.Group(live, 0) {
						got[gr.Key] = gr.Bytes
					}
					for _, gr := range h.Groups {
						if got[gr.Key] != gr.Bytes {
							t.Errorf("device %d at %s: %s %d bytes in the Store, %d by explain (all: %v)", dev, at, gr.Key, got[gr.Key], gr.Bytes, got)
						}
					}
				}
			}
		})
	}
}
