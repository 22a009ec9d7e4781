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

// TestCategorySeries: each column of the stacked category chart holds the
// bytes per category at the column's end, as the holders view counts them
// there; the columns add up to the active series.
func TestCategorySeries(t *testing.T) {
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
			dev := st.Devices()[0]
			first, last := st.Bounds(dev)
			const cols = 7
			series := st.CategorySeries(dev, first, last+1, cols)
			if len(series) != cols {
				t.Fatalf("%d columns", len(series))
			}
			tab := st.Categories(dev)
			span := last + 1 - first
			for k := range cols {
				ce := first + span/cols*int64(k+1) + span%cols*int64(k+1)/cols
				n := st.Applied(dev, ce-1)
				var want [8]int64
				for _, a := range st.LiveAtSeq(dev, n) {
					want[tab.Of(a.Born, a.Addr)] += a.Size
				}
				for cat, v := range series[k] {
					if v != want[cat] {
						t.Errorf("column %d (%d entries): category %d has %d bytes, the holders %d", k, n, cat, v, want[cat])
					}
				}
			}
		})
	}
}
