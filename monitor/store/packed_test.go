package store

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/npumon/npumon/replay/tiling"
)

// Every packed checkpoint unpacks to the blocks the same log keeps whole
// (a retention window turns packing off), before and after the first
// unpack re-packs it in address order; both kinds of packed size occur.
func TestPackedCheckpointsUnpackWhole(t *testing.T) {
	var sized, derived int
	for _, seed := range []uint64{1, 2, 3, 4} {
		for _, withTime := range []bool{false, true} {
			snap := genCapture(seed, 3000, withTime)
			packed := New(Options{CheckpointEvery: 64})
			whole := New(Options{CheckpointEvery: 64, Retain: Retention{Entries: 1 << 40}})
			if err := packed.IngestSnapshot(snap); err != nil {
				t.Fatal(err)
			}
			if err := whole.IngestSnapshot(snap); err != nil {
				t.Fatal(err)
			}
			for _, dev := range snap.Devices() {
				pd, wd := packed.devs[dev], whole.devs[dev]
				if len(pd.packed) == 0 {
					t.Fatalf("seed %d device %d: no checkpoint packed", seed, dev)
				}
				if len(pd.cps) != len(wd.cps) {
					t.Fatalf("seed %d device %d: %d checkpoints, want %d", seed, dev, len(pd.cps), len(wd.cps))
				}
				for _, p := range pd.packed {
					for _, f := range p.flags {
						if f&flagSized != 0 {
							sized++
						} else {
							derived++
						}
					}
				}
				for round := range 2 { // the second reads the re-packed, sorted form
					for i, cp := range pd.cps {
						pd.lastMu.Lock()
						pd.unpackedFrom, pd.unpacked = nil, nil
						pd.lastMu.Unlock()
						got := pd.unpack(cp)
						want := &tiling.Checkpoint{At: wd.cps[i].At, Segs: wd.cps[i].Segs, Blocks: append([]tiling.Block(nil), wd.cps[i].Blocks...)}
						want.EnsureSorted()
						got.EnsureSorted()
						if got.At != want.At || !reflect.DeepEqual(got.Blocks, want.Blocks) {
							t.Fatalf("seed %d device %d round %d: checkpoint %d at %d unpacks to %s", seed, dev, round, i, cp.At, diffBlocks(got.Blocks, want.Blocks))
						}
					}
				}
			}
		}
	}
	if sized == 0 || derived == 0 {
		t.Fatalf("packed blocks: %d with their size kept, %d sized by their request; want both", sized, derived)
	}
}

func diffBlocks(got, want []tiling.Block) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("block %d %+v, want %+v", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d blocks, want %d", len(got), len(want))
}
