package store

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
)

// captureFiles are every real fixture and replay's generated test snapshots.
func captureFiles(t *testing.T) []string {
	var out []string
	for _, pat := range []string{filepath.Join(fixture.Root(t), "snapshots", "*"), "../../replay/testdata/*.pickle", "../../replay/testdata/*.json"} {
		m, _ := filepath.Glob(pat)
		for _, p := range m {
			if !strings.HasPrefix(filepath.Base(p), "bad_") && !strings.HasSuffix(p, ".md") {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no capture files found")
	}
	return out
}

// The Store's numbers equal `npumon stats` (replay.ComputeStats) on every
// capture file: the final-state trace figures, and the figures right after
// each entry (--at-index), which stats derives by undoing from the end.
func TestStoreAgreesWithStats(t *testing.T) {
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
			stats, err := replay.ComputeStats(c, replay.StatsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ds := range stats.Devices {
				dev := ds.Device
				n := st.Len(dev)
				if n != int64(ds.TraceEntries) {
					t.Fatalf("device %d: %d entries, stats %d", dev, n, ds.TraceEntries)
				}
				start := st.Summary(dev, cursorAfter(st, dev, -1))
				if start.ActiveBytes != ds.ActiveBytesAtStart || start.ReservedBytes != ds.ReservedBytesAtStart {
					t.Fatalf("device %d start: active %d reserved %d, stats %d %d", dev, start.ActiveBytes, start.ReservedBytes, ds.ActiveBytesAtStart, ds.ReservedBytesAtStart)
				}
				end := st.Summary(dev, 1<<62)
				if end.PeakActiveBytes != ds.PeakActiveBytes || end.PeakReservedBytes != ds.PeakReservedBytes || end.OOMs != ds.OOMEvents {
					t.Fatalf("device %d: peak %d/%d ooms %d, stats %d/%d %d", dev, end.PeakActiveBytes, end.PeakReservedBytes, end.OOMs,
						ds.PeakActiveBytes, ds.PeakReservedBytes, ds.OOMEvents)
				}
				if end.ReservedBytes != ds.ReservedBytes {
					t.Fatalf("device %d: final reserved %d, stats %d", dev, end.ReservedBytes, ds.ReservedBytes)
				}
				pc, pv := st.Peak(dev)
				if pv != ds.PeakActiveBytes || pc != cursorAfter(st, dev, ds.PeakActiveIndex) {
					t.Fatalf("device %d: Peak %d at %d, stats %d at index %d", dev, pv, pc, ds.PeakActiveBytes, ds.PeakActiveIndex)
				}
				if ds.FirstTimeUS != nil {
					first, last := st.Bounds(dev)
					if first != *ds.FirstTimeUS || last != *ds.LastTimeUS {
						t.Fatalf("device %d: bounds %d..%d, stats %d..%d", dev, first, last, *ds.FirstTimeUS, *ds.LastTimeUS)
					}
				}
				var total int
				for _, v := range ds.Actions {
					total += v
				}
				if total != int(n) {
					t.Fatalf("device %d: actions %v", dev, ds.Actions)
				}
				evs := st.Events(dev, -1<<62, 1<<62, 0)
				stride := max(1, int(n)/300)
				for i := -1; i < int(n); i += stride {
					if st.TimeBase(dev) == TimeEpochUS && i >= 0 && i+1 < int(n) && evs[i+1].Time == evs[i].Time {
						continue // "after entry i" has no cursor of its own
					}
					idx := i
					at, err := replay.ComputeStats(c, replay.StatsOptions{Device: &dev, AtIndex: &idx})
					if err != nil {
						t.Fatal(err)
					}
					a := at.Devices[0]
					s := st.Summary(dev, cursorAfter(st, dev, i))
					if s.Segments != a.Segments || s.ReservedBytes != a.ReservedBytes || s.ActiveBytes != a.ActiveBytes ||
						s.LargestFreeBlock != a.LargestFreeBlockBytes || s.Blocks != a.Blocks || s.LiveBlocks != a.LiveBlocks ||
						s.TotalFreeBytes != a.InactiveBytes || s.Fragmentation != a.FreeFragmentation {
						t.Fatalf("device %d after entry %d: segments %d reserved %d active %d largest free %d blocks %d live %d inactive %d;\n"+
							"stats: segments %d reserved %d active %d largest free %d blocks %d live %d inactive %d", dev, i,
							s.Segments, s.ReservedBytes, s.ActiveBytes, s.LargestFreeBlock, s.Blocks, s.LiveBlocks, s.TotalFreeBytes,
							a.Segments, a.ReservedBytes, a.ActiveBytes, a.LargestFreeBlockBytes, a.Blocks, a.LiveBlocks, a.InactiveBytes)
					}
				}
			}
		})
	}
}

// StateAt equals replay's Timeline.StateAfter after every entry of every
// capture file (segments, live blocks with sizes and states).
func TestStoreStateAgreesOnFiles(t *testing.T) {
	for _, path := range captureFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c, err := replay.DecodeFile(path, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkAgreement(t, c.Snapshot, 61)
		})
	}
}
