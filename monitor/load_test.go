package monitor

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/replay"
)

// TestLoadSnapshot: a real snapshot loads into the Store with progress
// from decoding to indexing done, and the decoded capture comes back.
func TestLoadSnapshot(t *testing.T) {
	store := NewStore(StoreOptions{})
	var mu sync.Mutex
	var got []LoadProgress
	capt, err := LoadSnapshot(context.Background(), fixtureAssignment2(t), store, func(p LoadProgress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if capt == nil || len(capt.Snapshot.DeviceTraces) == 0 {
		t.Fatalf("capture %v", capt)
	}
	last := got[len(got)-1]
	if got[0].Stage != "decoding" || last.Stage != "indexing" || last.Entries == 0 || last.Entries != last.EntriesTotal ||
		last.BytesDone != last.BytesTotal || store.Len(store.Devices()[0]) == 0 {
		t.Fatalf("progress %+v … %+v, %d entries", got[0], last, store.Len(0))
	}
}

// TestLoadErrors: a missing file names itself; a cancelled load returns
// the context's error without waiting.
func TestLoadErrors(t *testing.T) {
	nop := func(LoadProgress) {}
	store := NewStore(StoreOptions{})
	if _, err := LoadSnapshot(context.Background(), "nope.pickle", store, nop); err == nil || !strings.Contains(err.Error(), "nope.pickle") {
		t.Errorf("missing snapshot: %v", err)
	}
	if err := LoadProfiler(context.Background(), "nope_ascend_pt", store, nop); err == nil || !strings.Contains(err.Error(), "nope_ascend_pt") {
		t.Errorf("missing profiler dir: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	block := make(chan struct{})
	defer close(block)
	if _, err := untilDone(ctx, func() (int, error) { <-block; return 1, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestLoadProfiler: a Python-generated FRAMEWORK directory loads its ops
// and memory records.
func TestLoadProfiler(t *testing.T) {
	store := NewStore(StoreOptions{})
	var stages []string
	if err := LoadProfiler(context.Background(), genProfilerDir, store, func(p LoadProgress) { stages = append(stages, p.Stage) }); err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 || stages[0] != "reading profiler data" || stages[len(stages)-1] != "indexing" ||
		len(store.Ops(0, 1<<62)) == 0 || store.Len(store.Devices()[0]) == 0 {
		t.Fatalf("stages %v, %d ops", stages, len(store.Ops(0, 1<<62)))
	}
}

// TestLoadSnapshotIndexingProgress: while the Store indexes a large trace,
// the entries indexed so far are reported, never decreasing, and the last
// report has them all.
func TestLoadSnapshotIndexingProgress(t *testing.T) {
	// One segment; 1 MiB blocks allocated and freed in turn.
	const base, mib = 0x7f0000000000, 1 << 20
	snap := &allocator.Snapshot{Segments: []allocator.Segment{{Address: base, TotalSize: 64 * mib, IsLarge: true,
		Blocks: []allocator.Block{{Address: base, Size: 64 * mib, State: allocator.StateInactive}}}}}
	var tr []allocator.TraceEntry
	for i := range 4*indexStep + 1000 {
		a := uint64(base + (i/2%64)*mib)
		act := allocator.ActionAlloc
		if i%2 == 1 {
			act = allocator.ActionFreeCompleted
		}
		tr = append(tr, allocator.TraceEntry{Action: act, Addr: a, Size: mib, TimeUS: int64(1_700_000_000_000_000 + i)})
	}
	snap.DeviceTraces = [][]allocator.TraceEntry{tr}
	path := filepath.Join(t.TempDir(), "big.pickle")
	if err := replay.WriteFile(path, snap, replay.WritePickle, replay.ExportDict); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = time.Microsecond // every tick of the ingest is seen
	var mu sync.Mutex
	var idx []int64
	var total int64
	_, err := LoadSnapshot(context.Background(), path, NewStore(StoreOptions{}), func(p LoadProgress) {
		if p.Stage == "indexing" {
			mu.Lock()
			idx = append(idx, p.Entries)
			total = p.EntriesTotal
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	mid := 0
	for i, e := range idx {
		if i > 0 && e < idx[i-1] {
			t.Fatalf("indexing progress went back: %v", idx)
		}
		if e > 0 && e < total {
			mid++
		}
	}
	if total == 0 || idx[len(idx)-1] != total || mid == 0 {
		t.Fatalf("indexing progress %v of %d: want steps between 0 and the total, ending at it", idx, total)
	}
}
