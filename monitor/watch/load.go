package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// progressEvery is how often Load reports the entries indexed.
var progressEvery = 100 * time.Millisecond

// LoadOptions tune Load.
type LoadOptions struct {
	// Limits bound the decoding of a snapshot file (replay.Options:
	// MaxFileSize, MaxMemory); Load sets its Progress.
	Limits replay.Options
	// MemoryOnly loads the memory data and no ops: not a snapshot's
	// annotation ops, not a profiler directory's ops (a watched directory's
	// ops come from its ProfilerTail), and profiler data whose records
	// name no block is refused.
	MemoryOnly bool
	// Report, when set, is told how far loading has come (from Load's own
	// goroutine).
	Report func(store.LoadProgress)
	// Prepare, when set, runs on a decoded snapshot before it is indexed
	// (cmd/npumon recovers a torch_npu trace's times there,
	// docs/timerecovery.md); its error ends the load.
	Prepare func(*replay.Capture) error
	// DropTrace gives a snapshot's decoded traces to the Store
	// (store.IngestOwned): Loaded.Capture then holds none, so the trace is
	// not kept twice (npumon replay); WithTrace gives them back.
	DropTrace bool
	// Stream, with DropTrace and without Prepare (which needs the whole
	// trace), decodes a snapshot's trace straight into the Store
	// (store.OwnedStream): the Store holds a growing prefix of it while the
	// file loads (not Settled until the load ends; Report gives the bytes
	// and entries so far), the decoded trace never exists whole, and the
	// Store ends as DropTrace's. A failed decode leaves none of it in st.
	Stream bool
}

// Loaded is what Load read: the decoded snapshot file, or the profiler
// data.
type Loaded struct {
	Capture  *replay.Capture // nil for profiler data
	Profiler *profiler.Data  // nil for a snapshot file
}

// Load reads the capture at path into st: a snapshot file (pickle or JSON
// export) or profiler data (a profiler directory, its parent, an SQLite
// export), decided by its content (monitor/classify) as every command
// decides it. It is the one way a saved capture enters a Store: npumon
// replay, the ranks of a job and a watched directory load through it.
// When ctx ends first it returns ctx.Err() at once; the decoders see ctx
// too (replay.DecodeFileContext, profiler.ReadDirContext) and stop soon
// after, before anything is indexed.
func Load(ctx context.Context, path string, st *store.Store, o LoadOptions) (Loaded, error) {
	report := o.Report
	if report == nil {
		report = func(store.LoadProgress) {}
	}
	return untilDone(ctx, func() (Loaded, error) {
		in, err := classify.Path(path)
		if err != nil {
			return Loaded{}, err
		}
		switch {
		case in.Kind.Profiler():
			d, err := loadProfiler(ctx, path, st, o.MemoryOnly, report)
			return Loaded{Profiler: d}, err
		case in.Kind.Snapshot() && o.Stream && o.DropTrace && o.Prepare == nil:
			c, err := loadStreamed(ctx, path, st, o.Limits, !o.MemoryOnly, report)
			return Loaded{Capture: c}, err
		case in.Kind.Snapshot():
			c, err := loadSnapshot(ctx, path, st, o.Limits, !o.MemoryOnly, o.DropTrace, o.Prepare, report)
			return Loaded{Capture: c}, err
		}
		return Loaded{}, errors.New(in.Describe())
	})
}

// loadSnapshot decodes a snapshot file into st, with (withOps) the ops its
// annotations mark.
func loadSnapshot(ctx context.Context, path string, st *store.Store, opts replay.Options, withOps, drop bool, prepare func(*replay.Capture) error, report func(store.LoadProgress)) (*replay.Capture, error) {
	var total int64
	opts.Progress = func(d, t int64) {
		total = max(t, 0)
		report(store.LoadProgress{Stage: "decoding", BytesDone: d, BytesTotal: total})
	}
	capt, err := replay.DecodeFileContext(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if prepare != nil {
		if err := prepare(capt); err != nil {
			return nil, err
		}
	}
	var n int64
	for _, tr := range capt.Snapshot.DeviceTraces {
		n += int64(len(tr))
	}
	report(store.LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, EntriesTotal: n})
	// While the Store indexes, the entries it has indexed so far are
	// reported every progressEvery.
	from := st.Indexed()
	stop := make(chan struct{})
	stopped := crash.GoEvery(stop, progressEvery, func() {
		done := min(st.Indexed()-from, n)
		report(store.LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, Entries: done, EntriesTotal: n})
	})
	var ops []store.Op
	if withOps { // from the trace, which IngestOwned drops
		ops = store.AnnotationOps(capt.Snapshot)
	}
	if drop {
		err = st.IngestOwned(capt.Snapshot)
	} else {
		err = st.IngestSnapshot(capt.Snapshot)
	}
	close(stop)
	<-stopped
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if withOps {
		st.IngestOps(ops)
	}
	report(store.LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, Entries: n, EntriesTotal: n})
	return capt, nil
}

// loadStreamed is loadSnapshot with DropTrace for a file whose trace goes
// straight into st while it is decoded (LoadOptions.Stream): Report gives
// the bytes read and the entries in st every few MiB; once the file is
// read the stream settles (store.OwnedStream.Finish). On an error st
// keeps nothing of the file's trace (OwnedStream.Abort).
func loadStreamed(ctx context.Context, path string, st *store.Store, opts replay.Options, withOps bool, report func(store.LoadProgress)) (*replay.Capture, error) {
	sink := st.StreamOwned()
	var total int64
	opts.Trace = sink
	opts.Progress = func(d, t int64) {
		total = max(t, 0)
		report(store.LoadProgress{Stage: "decoding", BytesDone: d, BytesTotal: total, Entries: sink.Entries()})
	}
	capt, err := replay.DecodeFileContext(ctx, path, opts)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		sink.Abort()
		return nil, err
	}
	n := sink.Entries()
	report(store.LoadProgress{Stage: "settling", BytesDone: total, BytesTotal: total, Entries: n, EntriesTotal: n})
	if err := sink.Finish(capt.Snapshot, capt.TraceLists); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if withOps {
		st.IngestOps(st.OwnedAnnotationOps(capt.Snapshot))
	}
	report(store.LoadProgress{Stage: "indexing", BytesDone: total, BytesTotal: total, Entries: n, EntriesTotal: n})
	return capt, nil
}

// WithTrace returns c with the device traces a Load with DropTrace gave
// to st put back (from st.Trace: entry for entry as decoded), in a copy of
// c and its Snapshot; c itself is unchanged. A device whose log in st is
// no longer c's keeps the empty trace. c is returned as it is when it
// holds every trace, nil for nil.
func WithTrace(c *replay.Capture, st *store.Store) *replay.Capture {
	if c == nil || c.Snapshot == nil {
		return c
	}
	var traces [][]snapshot.TraceEntry
	for dev, tr := range c.Snapshot.DeviceTraces {
		if len(tr) > 0 {
			continue
		}
		if t, ok := st.Trace(c.Snapshot, dev); ok && len(t) > 0 {
			if traces == nil {
				traces = slices.Clone(c.Snapshot.DeviceTraces)
			}
			traces[dev] = t
		}
	}
	if traces == nil {
		return c
	}
	cc, snap := *c, *c.Snapshot
	snap.DeviceTraces = traces
	cc.Snapshot = &snap
	return &cc
}

// loadProfiler reads profiler data into st: its ops and memory data
// (IngestProfiler), or with memoryOnly its memory records with a pointer
// alone (IngestProfilerMemory).
func loadProfiler(ctx context.Context, path string, st *store.Store, memoryOnly bool, report func(store.LoadProgress)) (*profiler.Data, error) {
	report(store.LoadProgress{Stage: "reading profiler data"})
	d, err := profiler.ReadDirContext(ctx, path)
	if err != nil {
		return nil, err
	}
	indexing := func(n int64) { report(store.LoadProgress{Stage: "indexing", EntriesTotal: n}) }
	if memoryOnly {
		n, err := IngestProfilerMemory(st, d, indexing)
		if err == nil && n == 0 {
			err = fmt.Errorf("%s: no memory records with addresses (its ops are on the timeline)", path)
		}
		return d, err
	}
	if err := IngestProfiler(st, d, indexing); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
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
		defer crash.Recover()
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
