package whatif

import (
	"fmt"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// TestAt: a curve's value after an entry is that of its last point at or
// before it, 0 before the first.
func TestAt(t *testing.T) {
	c := []Point{{Index: -1, Bytes: 10}, {Index: 3, Bytes: 20}, {Index: 7, Bytes: 5}}
	for i, tc := range []struct {
		i    int
		want int64
	}{{-2, 0}, {-1, 10}, {2, 10}, {3, 20}, {6, 20}, {7, 5}, {100, 5}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := At(c, tc.i); got != tc.want {
				t.Errorf("At(%d) = %d, want %d", tc.i, got, tc.want)
			}
		})
	}
}

// TestAlternatives: half the first oom request (at least 20 MiB), else
// half the largest allocation.
func TestAlternatives(t *testing.T) {
	const MiB = 1 << 20
	tr := func(es ...snapshot.TraceEntry) *snapshot.Snapshot {
		return &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{es}}
	}
	alloc := func(n int64) snapshot.TraceEntry {
		return snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: 1, Size: n}
	}
	oom := func(n int64) snapshot.TraceEntry { return snapshot.TraceEntry{Action: snapshot.ActionOOM, Size: n} }
	for i, tc := range []struct {
		s    *snapshot.Snapshot
		want string
	}{
		{tr(alloc(500*MiB), oom(300*MiB), oom(900*MiB)), "max_split_size_mb:150"},
		{tr(alloc(100*MiB), alloc(300*MiB)), "max_split_size_mb:150"},
		{tr(oom(10 * MiB)), "max_split_size_mb:20"},
		{tr(), "max_split_size_mb:20"},
	} {
		got := Alternatives(tc.s, nil)
		if len(got) != 2 || got[0] != "expandable_segments:True" || got[1] != tc.want {
			t.Errorf("%d: %v, want expandable_segments:True and %s", i, got, tc.want)
		}
	}
}
