package store

import (
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
)

// TestSummaryAfterStateAt: a Summary answered from the figures StateAt
// left (the cursor-move fast path) equals one computed afresh — blocks,
// live blocks, allocated and free figures alike.
func TestSummaryAfterStateAt(t *testing.T) {
	c, err := replay.DecodeFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fresh, cached := New(Options{}), New(Options{})
	if err := fresh.IngestSnapshot(c.Snapshot); err != nil {
		t.Fatal(err)
	}
	if err := cached.IngestSnapshot(c.Snapshot); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{0, 1, 1403, 5163} {
		want := fresh.SummaryAtSeq(0, n)
		cached.StateAtSeq(0, n)
		if got := cached.SummaryAtSeq(0, n); got != want {
			t.Errorf("after %d entries: summary after StateAt\n%+v\nfresh\n%+v", n, got, want)
		}
	}
}
