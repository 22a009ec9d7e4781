package watch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

// TestLoadSnapshot: a real snapshot, known by its content, loads into the Store with progress
// from decoding to indexing done, and the decoded capture comes back.
func TestLoadSnapshot(t *testing.T) {
	st := store.New(store.Options{})
	var mu sync.Mutex
	var got []store.LoadProgress
	l, err := Load(context.Background(), fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), st, LoadOptions{Report: func(p store.LoadProgress) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}})
	capt := l.Capture
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
	if _, err := Load(context.Background(), "nope.pickle", st, LoadOptions{Report: nop}); err == nil || !strings.Contains(err.Error(), "nope.pickle") {
		t.Errorf("missing snapshot: %v", err)
	}
	if _, err := Load(context.Background(), "nope_ascend_pt", st, LoadOptions{Report: nop}); err == nil || !strings.Contains(err.Error(), "nope_ascend_pt") {
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

// TestLoadProfiler: a Python-generated FRAMEWORK directory, known by its
// content, loads its ops
// and memory records.
func TestLoadProfiler(t *testing.T) {
	st := store.New(store.Options{})
	var stages []string
	if _, err := Load(context.Background(), genProfilerDir, st, LoadOptions{Report: func(p store.LoadProgress) { stages = append(stages, p.Stage) }}); err != nil {
		t.Fatal(err)
	}
	if len(stages) < 2 || stages[0] != "reading profiler data" || stages[len(stages)-1] != "indexing" ||
		len(st.Ops(0, 1<<62)) == 0 || st.Len(st.Devices()[0]) == 0 {
		t.Fatalf("stages %v, %d ops", stages, len(st.Ops(0, 1<<62)))
	}
}

// TestLoadByContent: what a path is comes from its content, not its name:
// a snapshot named like a text file loads, a text file named like a
// snapshot is refused with what it is, and with MemoryOnly a profiler
// directory's ops stay out of the Store.
func TestLoadByContent(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(odd, src, 0o600); err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	if l, err := Load(context.Background(), odd, st, LoadOptions{}); err != nil || l.Capture == nil || l.Profiler != nil {
		t.Fatalf("a snapshot named notes.txt: %+v, %v", l, err)
	}
	fake := filepath.Join(dir, "snapshot.pickle")
	if err := os.WriteFile(fake, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), fake, store.New(store.Options{}), LoadOptions{}); err == nil {
		t.Error("a text file named snapshot.pickle loaded")
	}
	mem := store.New(store.Options{})
	l, err := Load(context.Background(), genProfilerDir, mem, LoadOptions{MemoryOnly: true})
	if err != nil || l.Profiler == nil || mem.Len(mem.Devices()[0]) == 0 || len(mem.Ops(0, 1<<62)) != 0 {
		t.Fatalf("memory only: %v, %d ops", err, len(mem.Ops(0, 1<<62)))
	}
}

// TestLoadSnapshotIndexingProgress: while the Store indexes a large trace,
// the entries indexed so far are reported, never decreasing, and the last
// report has them all.
func TestLoadSnapshotIndexingProgress(t *testing.T) {
	// One segment; 1 MiB blocks allocated and freed in turn.
	const base, mib = 0x7f0000000000, 1 << 20
	snap := &snapshot.Snapshot{Segments: []snapshot.Segment{{Address: base, TotalSize: 64 * mib, IsLarge: true,
		Blocks: []snapshot.Block{{Address: base, Size: 64 * mib, State: snapshot.StateInactive}}}}}
	var tr []snapshot.TraceEntry
	for i := range 4<<16 + 1000 { // several of the Store's indexing steps (1<<16 entries)
		a := uint64(base + (i/2%64)*mib)
		act := snapshot.ActionAlloc
		if i%2 == 1 {
			act = snapshot.ActionFreeCompleted
		}
		tr = append(tr, snapshot.TraceEntry{Action: act, Addr: a, Size: mib, TimeUS: int64(1_700_000_000_000_000 + i)})
	}
	snap.DeviceTraces = [][]snapshot.TraceEntry{tr}
	path := filepath.Join(t.TempDir(), "big.pickle")
	if err := replay.WriteFile(path, snap, replay.WritePickle, replay.ExportDict); err != nil {
		t.Fatal(err)
	}
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = time.Microsecond // every tick of the ingest is seen
	var mu sync.Mutex
	var idx []int64
	var total int64
	_, err := Load(context.Background(), path, store.New(store.Options{}), LoadOptions{Report: func(p store.LoadProgress) {
		if p.Stage == "indexing" {
			mu.Lock()
			idx = append(idx, p.Entries)
			total = p.EntriesTotal
			mu.Unlock()
		}
	}})
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
