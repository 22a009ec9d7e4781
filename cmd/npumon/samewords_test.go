package main

import (
	"strconv"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
)

// TestSameWordsAcrossCommands: on the real 2026 fixture, a name printed by
// `stats --json`, `stats --json --at-index` and `replay --headless` means
// the same number: blocks, live_blocks, active_bytes, allocated_bytes,
// requested_bytes, inactive_bytes, largest_free_block_bytes,
// free_fragmentation, at the final state and at the start.
func TestSameWordsAcrossCommands(t *testing.T) {
	snap := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	var final replay.Stats
	runJSON(t, &final, "stats", "--json", snap)
	f := final.Devices[0]
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"end", []string{"--headless", "20ms"}},
		{"start", []string{"--headless", "20ms", "--play", "--speed", "0.01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := headlessSummary(t, append(tc.args, snap)...)
			// the state after the entries the headless run applied
			atStat := strconv.Itoa(int(h.Applied) - 1)
			var at replay.Stats
			runJSON(t, &at, "stats", "--json", "--at-index", atStat, snap)
			a := at.Devices[0]
			if h.Applied == 5163 {
				if a.Blocks != f.Blocks || a.LiveBlocks != f.LiveBlocks || a.ActiveBytes != f.ActiveBytes || a.AllocatedBytes != f.AllocatedBytes {
					t.Errorf("stats --at-index 5162 %+v differs from stats %+v", a, f)
				}
			}
			if h.Blocks == nil || h.LiveBlocks == nil || h.AllocatedBytes == nil || h.RequestedBytes == nil ||
				h.InactiveBytes == nil || h.LargestFreeBlockBytes == nil || h.FreeFragmentation == nil {
				t.Fatalf("headless summary without segment-map figures: %+v", h)
			}
			for _, c := range []struct {
				name      string
				got, want any
			}{
				{"blocks", *h.Blocks, a.Blocks},
				{"live_blocks", *h.LiveBlocks, a.LiveBlocks},
				{"active_bytes", h.ActiveBytes, a.ActiveBytes},
				{"allocated_bytes", *h.AllocatedBytes, a.AllocatedBytes},
				{"requested_bytes", *h.RequestedBytes, a.RequestedBytes},
				{"inactive_bytes", *h.InactiveBytes, a.InactiveBytes},
				{"largest_free_block_bytes", *h.LargestFreeBlockBytes, a.LargestFreeBlockBytes},
				{"free_fragmentation", *h.FreeFragmentation, a.FreeFragmentation},
				{"reserved_bytes", h.ReservedBytes, a.ReservedBytes},
			} {
				t.Run(c.name, func(t *testing.T) {
					if c.got != c.want {
						t.Errorf("%s: replay --headless %v, stats --at-index %s %v", c.name, c.got, atStat, c.want)
					}
				})
			}
		})
	}
}

// TestPeakAtStartIsNull: when the peak is the state before the first entry,
// stats and replay --headless both print a null peak time.
func TestPeakAtStartIsNull(t *testing.T) {
	src := needFixture(t, "../../replay/testdata/torch113_list.pickle")
	var st replay.Stats
	runJSON(t, &st, "stats", "--json", src)
	if d := st.Devices[0]; d.PeakActiveIndex != -1 || d.PeakActiveTimeUS != nil {
		t.Fatalf("stats: peak index %d time %v, want -1 and null", d.PeakActiveIndex, d.PeakActiveTimeUS)
	}
	h := headlessSummary(t, "--headless", "20ms", src)
	if h.PeakActiveTime != nil {
		t.Errorf("replay --headless: peak_active_time %d for a peak at the start, want null", *h.PeakActiveTime)
	}
}
