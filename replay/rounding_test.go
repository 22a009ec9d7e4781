package replay

import (
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestSizeRounder: re-created blocks get round_size of the requested size,
// with torch_npu's 32-byte pad for a torch_npu dump and the file's
// roundup_power2_divisions.
func TestSizeRounder(t *testing.T) {
	div := &snapshot.Settings{RoundupPower2Divisions: map[int64]int64{1: 4}}
	for _, tc := range []struct {
		name     string
		snap     *snapshot.Snapshot
		req, out int64
	}{
		{"cuda minimum", &snapshot.Snapshot{}, 4, 512},
		{"cuda 512 multiple", &snapshot.Snapshot{}, 1000, 1024},
		{"cuda exact", &snapshot.Snapshot{}, 2 << 20, 2 << 20},
		{"npu pad", &snapshot.Snapshot{TorchNPU: true}, 2<<20 - 32, 2 << 20},
		{"npu pad crosses", &snapshot.Snapshot{TorchNPU: true}, 2 << 20, 2<<20 + 512},
		{"power2 divisions", &snapshot.Snapshot{Settings: div}, 1_500_000, 1_572_864},
		{"no divisions", &snapshot.Snapshot{}, 1_500_000, 1_500_160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SizeRounder(tc.snap)(tc.req); got != tc.out {
				t.Errorf("round(%d) = %d, want %d", tc.req, got, tc.out)
			}
		})
	}
}

// TestSameWordsFinalState: on the real 2026 fixture, the figures stats
// gives for the final state equal those of stats --at-index at the last
// entry, and the start state's allocated bytes equal the final ones (every
// allocation of the trace is freed again, so the same blocks are live).
func TestSameWordsFinalState(t *testing.T) {
	c := mustDecode(t, fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	final, err := ComputeStats(c, StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := final.Devices[0]
	if f.Blocks != 455 || f.LiveBlocks != 229 || f.ActiveBytes != 1373919236 || f.AllocatedBytes != 1377753600 {
		t.Fatalf("final: blocks %d live %d active %d allocated %d", f.Blocks, f.LiveBlocks, f.ActiveBytes, f.AllocatedBytes)
	}
	for _, tc := range []struct {
		name string
		at   int
	}{{"last entry", 5162}, {"start", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			i := tc.at
			st, err := ComputeStats(c, StatsOptions{AtIndex: &i})
			if err != nil {
				t.Fatal(err)
			}
			a := st.Devices[0]
			if a.Blocks != f.Blocks || a.LiveBlocks != f.LiveBlocks || a.ActiveBytes != f.ActiveBytes ||
				a.AllocatedBytes != f.AllocatedBytes || a.InactiveBytes != f.InactiveBytes || a.FreeFragmentation != f.FreeFragmentation {
				t.Errorf("at %d: blocks %d live %d active %d allocated %d inactive %d frag %v; final: %d %d %d %d %d %v", i,
					a.Blocks, a.LiveBlocks, a.ActiveBytes, a.AllocatedBytes, a.InactiveBytes, a.FreeFragmentation,
					f.Blocks, f.LiveBlocks, f.ActiveBytes, f.AllocatedBytes, f.InactiveBytes, f.FreeFragmentation)
			}
		})
	}
	// At the active peak the live blocks the trace re-created are counted
	// as estimates, and allocated bytes are whole 512-byte blocks.
	i := 1402
	st, _ := ComputeStats(c, StatsOptions{AtIndex: &i})
	if a := st.Devices[0]; a.EstimatedBlocks == 0 || a.AllocatedBytes%512 != 0 {
		t.Errorf("at the peak: %d estimated blocks, allocated %d", a.EstimatedBlocks, a.AllocatedBytes)
	}
}
