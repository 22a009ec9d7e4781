package monitor

import (
	"context"
	"fmt"
	"time"

	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// LoadProgress reports how far loading a saved capture into a Store has
// come (the terminal UI shows it while npumon replay loads).
type LoadProgress struct {
	Stage      string // e.g. "decoding", "indexing"
	BytesDone  int64
	BytesTotal int64 // 0 when unknown
	Entries    int64 // trace entries indexed so far
	// EntriesTotal is the number of entries to index, 0 when unknown.
	EntriesTotal int64
}

// progressEvery is how often LoadSnapshot reports the entries indexed.
var progressEvery = 100 * time.Millisecond

// LoadSnapshot decodes the snapshot file at path (pickle or JSON export)
// into store, reporting progress from its own goroutine, and returns the
// decoded capture. When ctx ends first it returns ctx.Err() at once; the
// decoder sees ctx too (replay.DecodeFileContext) and stops within a few
// hundred KiB of input, before anything is indexed.
func LoadSnapshot(ctx context.Context, path string, store *Store, report func(LoadProgress)) (*replay.Capture, error) {
	return untilDone(ctx, func() (*replay.Capture, error) {
		var total int64
		capt, err := replay.DecodeFileContext(ctx, path, replay.Options{Progress: func(d, t int64) {
			total = max(t, 0)
			report(LoadProgress{Stage: "decoding", BytesDone: d, BytesTotal: total})
		}})
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var n int64
		for _, tr := range capt.Snapshot.DeviceTraces {
			n += int64(len(tr))
		}
		report(LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, EntriesTotal: n})
		// While the Store indexes, the entries it has indexed so far are
		// reported every progressEvery.
		from := store.indexed.Load()
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(progressEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					done := min(store.indexed.Load()-from, n)
					report(LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, Entries: done, EntriesTotal: n})
				}
			}
		}()
		err = store.IngestSnapshot(capt.Snapshot)
		close(stop)
		<-stopped
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		store.IngestOps(AnnotationOps(capt.Snapshot))
		report(LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, Entries: n, EntriesTotal: n})
		return capt, nil
	})
}

// LoadProfiler reads a torch_npu profiler directory (or its SQLite export)
// at path into store (IngestProfiler), reporting progress; like
// LoadSnapshot it returns at once when ctx ends.
func LoadProfiler(ctx context.Context, path string, store *Store, report func(LoadProgress)) error {
	_, err := LoadProfilerData(ctx, path, store, report)
	return err
}

// LoadProfilerData is LoadProfiler returning what was read, so a caller
// can say what the data holds (NoBlockTrace).
func LoadProfilerData(ctx context.Context, path string, store *Store, report func(LoadProgress)) (*profiler.Data, error) {
	return untilDone(ctx, func() (*profiler.Data, error) {
		report(LoadProgress{Stage: "reading profiler data"})
		d, err := profiler.ReadDirContext(ctx, path)
		if err != nil {
			return nil, err
		}
		err = IngestProfiler(store, d, func(n int64) {
			report(LoadProgress{Stage: "indexing", EntriesTotal: n})
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return d, nil
	})
}

// NoBlockTrace is the line a view shows for profiler data whose memory
// records name no block (analysed output): its timeline has the totals the
// records state and the ops, and no segment map. "" when there is a
// block-level trace.
func NoBlockTrace(d *profiler.Data) string {
	if d == nil {
		return ""
	}
	for i := range d.Memory {
		if d.Memory[i].Ptr != 0 {
			return ""
		}
	}
	if len(d.Memory) == 0 {
		return "no memory records: ops only"
	}
	return "no block-level trace: memory_record totals only"
}

// untilDone runs fn in its own goroutine and returns its result, or
// ctx.Err() as soon as ctx ends, leaving fn to finish unobserved.
func untilDone[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
