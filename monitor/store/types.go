// Package store is the time-indexed Store that every npumon view queries:
// per device, the trace entries in order with the byte series, checkpoints
// of the segment map and the ops, queried by cursor (a time or a position).
// Its sources are elsewhere: monitor/attach (an in-process allocator),
// monitor/wire (a live producer over a socket) and monitor/watch (files and
// directories).
package store

import (
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/replay/tiling"
)

// Query result types. Every value a Store query returns is owned by the
// caller: no slice or pointer in it aliases Store internals.

// TimeBase says what cursor values mean for a device log.
type TimeBase uint8

const (
	// TimeEpochUS: cursors and times are microseconds since the Unix epoch.
	TimeEpochUS TimeBase = iota
	// TimeSequence: the source has no timestamps; cursors are entry sequence
	// numbers (0-based index into the device's trace).
	TimeSequence
	// TimePollUS is a wire producer's time base only (HELLO time_base 2):
	// entry times are epoch µs, but the producer stamped each entry when it
	// found it (a poll of the allocator's trace), not when it happened; the
	// entry happened within Hello.Resolution before its time. A Store keeps
	// such entries under TimeEpochUS.
	TimePollUS
)

func (b TimeBase) String() string {
	switch b {
	case TimeSequence:
		return "sequence"
	case TimePollUS:
		return "poll_us"
	}
	return "epoch_us"
}

// Event is one trace entry of a device log with its position.
type Event struct {
	Seq  int64 // 0-based index in the device log
	Time int64 // epoch µs, or Seq when the log has no time
	// ActionName is the action as its source serialized it (torch's name
	// of a known action, else the name the source gave it).
	ActionName string
	// Interval is set where the entry's time was recovered only as an
	// interval (Snapshot.TimeExact false, docs/timerecovery.md): Time is its
	// lower bound and TimeHi the next exact entry's time (0: none follows).
	Interval bool
	TimeHi   int64
	snapshot.TraceEntry
}

// Op is one op range keyed by epoch time: the one op type (oprange.Op).
type Op = oprange.Op

// Gap is a free range inside a segment at a cursor.
type Gap = tiling.Range

// State is what the segment map draws: the device's segments with live
// blocks at the cursor. Blocks tile every segment (inactive blocks fill the
// free ranges), Gaps lists those free ranges again for quick access.
type State struct {
	Device   int
	Cursor   int64 // the cursor asked for
	Applied  int64 // number of log entries applied (entries with Seq < Applied)
	Segments []snapshot.Segment
	Gaps     []Gap
	// Thinned: the cursor is before the retention window (docs/retention.md);
	// its segment map was dropped, Segments and Gaps are empty and Applied
	// is known only to the thinned series' resolution.
	Thinned bool
}

// MinMax is one chart column: the extremes of a value over the column's span.
type MinMax struct {
	Min, Max int64
}

// Column selects a series.
type Column uint8

const (
	ColActive Column = iota
	ColAllocated
	ColReserved
)

// Series holds per-column extremes of the byte series over [T0, T1).
type Series struct {
	T0, T1    int64
	Columns   int
	Active    []MinMax
	Allocated []MinMax
	Reserved  []MinMax
}

// Summary describes a device at a cursor.
type Summary struct {
	Device      int
	TimeBase    TimeBase
	Cursor      int64
	Applied     int64
	Entries     int64 // total entries in the log
	FirstTime   int64
	LastTime    int64
	ActiveBytes int64
	// AllocatedBytes is the allocated series: active bytes less pending
	// frees, in the trace's unit (requested bytes), or the allocated
	// bytes a profiler's memory records state.
	AllocatedBytes int64
	// MapAllocatedBytes is Σ block size of the active_allocated blocks of
	// the segment map at the cursor (rounded sizes: allocated_bytes).
	MapAllocatedBytes int64
	ReservedBytes     int64
	Segments          int
	Blocks            int // blocks tiling the segments, inactive ones included (as `npumon stats` counts them)
	LiveBlocks        int // live allocations (as `npumon stats` counts them)
	LargestFreeBlock  int64
	TotalFreeBytes    int64   // Σ free ranges (gaps) of the segment map at the cursor: inactive_bytes
	Fragmentation     float64 // free_fragmentation: 1 − largest free / total free; 0 when nothing is free
	PeakActiveBytes   int64   // peak so far (up to the cursor)
	PeakActiveTime    int64
	PeakActiveAtStart bool // the peak is the state before the first entry (PeakActiveTime is then no entry's time)
	PeakReservedBytes int64
	// PeakAllocatedBytes is the peak of the allocated series (its unit).
	PeakAllocatedBytes int64
	OOMs               int
	Dropped            int64 // entries a live producer dropped (gap records) up to the cursor
	// ThinnedEntries are the entries before the retention window (their
	// detail was dropped; the byte series and peaks still cover them), and
	// DetailFrom the cursor of the earliest position held in detail.
	ThinnedEntries int64
	DetailFrom     int64
	// Thinned: the cursor is before the window; only the peaks, the counts
	// and the times are given (the byte and segment-map figures are 0).
	Thinned bool
}

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

// Fraction is how much of the load is done, by bytes or else entries; ok
// is false when no total is known.
func (p LoadProgress) Fraction() (done float64, ok bool) {
	switch {
	case p.BytesTotal > 0:
		return min(1, max(0, float64(p.BytesDone)/float64(p.BytesTotal))), true
	case p.EntriesTotal > 0:
		return min(1, max(0, float64(p.Entries)/float64(p.EntriesTotal))), true
	}
	return 0, false
}
