package watch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/testdata/fixture"
)

// TestLoadSnapshot: a real snapshot loads into the Store with progress
// from decoding to indexing done, and the decoded capture comes back.
func TestLoadSnapshot(t *testing.T) {
	st := store.New(store.Options{})
	var mu sync.Mutex
	var got []store.LoadProgress
	capt, err := LoadSnapshot(context.Background(), fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), st, func(p store.LoadProgress) {
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
		last.BytesDone != last.BytesTotal || st.Len(st.Devices()[0]) == 0 {
		t.Fatalf("progress %+v … %+v, %d entries", got[0], last, st.Len(0))
	}
}

// TestLoadErrors: a missing file names itself; a cancelled load returns
// the context's error without waiting.
func TestLoadErrors(t *testing.T) {
	nop := func(store.LoadProgress) {}
	st := store.New(store.Options{})
	if _, err := LoadSnapshot(context.Background(), "nope.pickle", st, nop); err == nil || !strings.Contains(err.Error(), "nope.pickle") {
		t.Errorf("missing snapshot: %v", err)
	}
	if err := LoadProfiler(context.Background(), "nope_ascend_pt", st, nop); err == nil || !strings.Contains(err.Error(), "nope_ascend_pt") {
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
	st := store.New(store.Options{})
	var stages []string
	if err := LoadProfiler(context.Background(), genProfilerDir, st, func(p store.LoadProgress) { stages = append(stages, p.Stage) }); err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 || stages[0] != "reading profiler data" || stages[len(stages)-1] != "indexing" ||
		len(st.Ops(0, 1<<62)) == 0 || st.Len(st.Devices()[0]) == 0 {
		t.Fatalf("stages %v, %d ops", stages, len(st.Ops(0, 1<<62)))
	}
}
