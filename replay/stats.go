package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/npumon/npumon/internal/addrmap"
	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
)

// Stats is the summary `npumon stats` prints; its JSON form is the
// command's --json output (sizes in bytes, times in epoch µs or null).
type Stats struct {
	Path           string        `json:"path"`
	Kind           string        `json:"kind"` // always "snapshot"
	Format         string        `json:"format"`
	Schema         string        `json:"schema"`
	SchemaEvidence string        `json:"schema_evidence"` // what in the file decided schema
	HasTimestamps  bool          `json:"has_timestamps"`
	AtIndex        *int          `json:"at_index,omitempty"` // set with --at-index
	Devices        []DeviceStats `json:"devices"`
	// Implausible is the decode's Sanity finding (the caller warns).
	Implausible *Implausible `json:"-"`
}

// DeviceStats are one device's figures (docs/json.md defines each name).
// Without an index they describe the final state; with one, the segment
// map figures (Segments … FreeFragmentation) and ActiveBytes describe the
// moment right after that trace entry (docs/timeline.md).
type DeviceStats struct {
	Device int `json:"device"`
	// Segments and Blocks count the segment map: every block tiling the
	// segments, inactive ones included.
	Segments int `json:"segments"`
	Blocks   int `json:"blocks"`
	// LiveBlocks counts the live allocations (active_allocated and
	// active_pending_free).
	LiveBlocks    int   `json:"live_blocks"`
	ReservedBytes int64 `json:"reserved_bytes"`
	// AllocatedBytes is Σ block size (rounded, as the allocator holds
	// them) of active_allocated blocks; EstimatedBlocks of the live
	// blocks have a size re-created as round_size(requested).
	AllocatedBytes  int64 `json:"allocated_bytes"`
	EstimatedBlocks int   `json:"estimated_blocks"`
	// ActiveBytes is the active series: Σ requested bytes of the live
	// allocations (pending frees included).
	ActiveBytes           int64 `json:"active_bytes"`
	RequestedBytes        int64 `json:"requested_bytes"`
	InactiveBytes         int64 `json:"inactive_bytes"`
	LargestFreeBlockBytes int64 `json:"largest_free_block_bytes"`
	// FreeFragmentation is 1 − largest free block / inactive bytes (0
	// when nothing is free).
	FreeFragmentation float64 `json:"free_fragmentation"`
	// InactiveFraction is inactive bytes / reserved bytes (0 when nothing
	// is reserved): the share of reserved memory cached but unused.
	InactiveFraction     float64        `json:"inactive_fraction"`
	TraceEntries         int            `json:"trace_entries"`
	Actions              map[string]int `json:"actions"`
	FirstTimeUS          *int64         `json:"first_time_us"`
	LastTimeUS           *int64         `json:"last_time_us"`
	ActiveBytesAtStart   int64          `json:"active_bytes_at_start"`
	PeakActiveBytes      int64          `json:"peak_active_bytes"`
	PeakActiveIndex      int            `json:"peak_active_index"`
	PeakActiveTimeUS     *int64         `json:"peak_active_time_us"`
	ReservedBytesAtStart int64          `json:"reserved_bytes_at_start"`
	PeakReservedBytes    int64          `json:"peak_reserved_bytes"`
	OOMEvents            int            `json:"oom_events"`
	// TimeSource says where the entries' times come from: "trace" (their
	// own time_us), "recovered" (from a profiler run of the same job,
	// docs/timerecovery.md) or "none". TimeRecoveredFrom ("framework",
	// "operator_memory", "memory_record") and TimeRecoveredShare (the
	// matched share of the allocator events, 0–1) are null unless
	// recovered.
	TimeSource         string   `json:"time_source"`
	TimeRecoveredFrom  *string  `json:"time_recovered_from"`
	TimeRecoveredShare *float64 `json:"time_recovered_share"`
}

// StatsOptions select what ComputeStats reports.
type StatsOptions struct {
	Device  *int // nil: every device
	AtIndex *int // nil: the final state; -1: before the first entry
	// mode is how StatsFile folds the trace: streamAuto (the zero value
	// means it too) unless a test compares the sequential and parallel folds.
	mode streamMode
}

// ComputeStats summarises a capture per device.
func ComputeStats(c *Capture, opts StatsOptions) (*Stats, error) {
	s := c.Snapshot
	out := &Stats{Path: c.Path, Kind: "snapshot", Format: c.Format, Schema: c.Schema, SchemaEvidence: c.SchemaEvidence,
		HasTimestamps: s.HasTimestamps(), AtIndex: opts.AtIndex, Devices: []DeviceStats{}}
	devices, err := selectDevices(s.Devices(), opts.Device)
	if err != nil {
		return nil, err
	}
	if opts.AtIndex != nil {
		// The index must name an entry of at least one device; devices
		// with shorter traces report their final state.
		i, longest := *opts.AtIndex, 0
		for _, dev := range devices {
			if dev < len(s.DeviceTraces) {
				longest = max(longest, len(s.DeviceTraces[dev]))
			}
		}
		if i < -1 || i >= longest {
			return nil, fmt.Errorf("--at-index %d is out of range: the longest trace has %d entries (0…%d; -1 is the start)", i, longest, longest-1)
		}
	}
	for _, dev := range devices {
		ds := deviceStats(s, dev, out.HasTimestamps, opts.AtIndex)
		if dev < len(s.TimeExact) && s.TimeExact[dev] != nil {
			ds.TimeSource = TimeSourceRecovered
		}
		out.Devices = append(out.Devices, *ds)
	}
	return out, nil
}

// Time sources of a device's entries (DeviceStats.TimeSource).
const (
	TimeSourceTrace     = "trace"
	TimeSourceRecovered = "recovered"
	TimeSourceNone      = "none"
)

func deviceStats(s *snapshot.Snapshot, dev int, hasTime bool, atIndex *int) *DeviceStats {
	var entries []snapshot.TraceEntry
	if dev < len(s.DeviceTraces) {
		entries = s.DeviceTraces[dev]
	}
	acc := newTraceAcc()
	for i := range entries {
		acc.add(&entries[i])
	}
	final := deviceSegments(s, dev)
	ds := acc.stats(dev, final, hasTime, s.Actions)
	if atIndex != nil {
		t := timelineOf(dev, entries, final, acc, SizeRounder(s)) // acc's fold serves it too
		i := min(*atIndex, len(entries)-1)
		segs, est := t.StateAfterEstimated(i)
		segmentFigures(ds, segs)
		ds.EstimatedBlocks = est
		ds.LiveBlocks, ds.ActiveBytes = t.LiveAfter(i)
		ds.ReservedBytes = ds.ReservedBytesAtStart
		for j := 0; j <= i; j++ {
			ds.ReservedBytes += ReservedDelta(&entries[j])
		}
	}
	return ds
}

// deviceSegments returns the device's final segments (shared, read-only).
func deviceSegments(s *snapshot.Snapshot, dev int) []snapshot.Segment {
	var out []snapshot.Segment
	for i := range s.Segments {
		if s.Segments[i].Device == dev {
			out = append(out, s.Segments[i])
		}
	}
	return out
}

// traceAcc folds one device trace, entry by entry, into the figures stats
// needs, so `npumon stats` can run without keeping the trace in memory.
// Series values are kept relative to the start (0); the start itself needs
// the final segments and comes in stats.
type traceAcc struct {
	n                   int
	counts              [256]int
	active, reserved    int64 // running deltas
	peakActive          int64 // max over the start (0) and every entry
	peakIndex           int
	peakTime            int64
	peakReserved        int64
	firstTime, lastTime int64
	firstFreed          []StartAlloc          // timeline rule (a): addresses first seen freed, in trace order
	seen                addrmap.Map[struct{}] // addresses named by alloc/free-family events
}

func newTraceAcc() *traceAcc {
	return &traceAcc{peakIndex: -1}
}

// add folds entry e. It reads e's action, address, size, stream, frames
// and time only: the parallel fold hands it just those (foldEntry).
func (a *traceAcc) add(e *snapshot.TraceEntry) {
	a.counts[e.Action]++
	if e.Action.IsAllocFamily() {
		if _, added := a.seen.Insert(e.Addr); added {
			if e.Action != snapshot.ActionAlloc {
				a.firstFreed = append(a.firstFreed, StartAlloc{*entryBlock(e, freedState(e.Action)), e.Stream})
			}
		}
	}
	a.active += ActiveDelta(e)
	a.reserved += ReservedDelta(e)
	if a.active > a.peakActive {
		a.peakActive, a.peakIndex, a.peakTime = a.active, a.n, e.TimeUS
	}
	a.peakReserved = max(a.peakReserved, a.reserved)
	if e.TimeUS != 0 {
		if a.firstTime == 0 {
			a.firstTime = e.TimeUS
		}
		a.lastTime = e.TimeUS
	}
	a.n++
}

// StartAlloc is an allocation live before a device trace's first entry.
type StartAlloc struct {
	// Block is the allocation as the trace's first entry naming it
	// describes it (rule (a): its size as both sizes, pending when that
	// entry is free_completed) or the final block itself (rule (b)).
	Block  snapshot.Block
	Stream uint64 // that entry's stream (a), the block's segment's (b)
}

// Size is what the active series counts the allocation for (tiling.LiveSize).
func (a *StartAlloc) Size() int64 { return tiling.LiveSize(&a.Block) }

// freedState is the state of a block whose first alloc-family entry is
// the free action a: still pending when that entry completes the free.
func freedState(a snapshot.Action) snapshot.BlockState {
	if a == snapshot.ActionFreeCompleted {
		return snapshot.StateActivePendingFree
	}
	return snapshot.StateActiveAllocated
}

// liveAtStart is the one place timeline rules (a) and (b) are applied: the
// allocations live before the first entry, in address order — (a) every
// address whose first alloc-family entry frees it, (b) every active final
// block the trace never names. The slice is the caller's.
func (a *traceAcc) liveAtStart(final []snapshot.Segment, round func(int64) int64) []StartAlloc {
	live := slices.Clone(a.firstFreed)
	for i := range live { // (a): the trace knows the requested size only
		live[i].Block.Size = round(live[i].Block.RequestedSize)
	}
	for i := range final {
		for j := range final[i].Blocks {
			b := &final[i].Blocks[j]
			if !b.State.Active() {
				continue
			}
			if a.seen.Ptr(b.Address) == nil {
				live = append(live, StartAlloc{*b, final[i].Stream})
			}
		}
	}
	slices.SortStableFunc(live, func(x, y StartAlloc) int { return cmp.Compare(x.Block.Address, y.Block.Address) })
	return live
}

// activeAtStart is the active series' start value: Σ liveAtStart.
func (a *traceAcc) activeAtStart(final []snapshot.Segment) int64 {
	return sumLive(a.liveAtStart(final, func(n int64) int64 { return n }))
}

func sumLive(live []StartAlloc) int64 {
	var n int64
	for i := range live {
		n += live[i].Size()
	}
	return n
}

// stats completes the figures with the device's final segments.
func (a *traceAcc) stats(dev int, final []snapshot.Segment, hasTime bool, actions *snapshot.ActionTable) *DeviceStats {
	ds := &DeviceStats{Device: dev, Actions: map[string]int{}, TraceEntries: a.n}
	segmentFigures(ds, final)
	ds.ActiveBytesAtStart = a.activeAtStart(final)
	ds.ActiveBytes = ds.ActiveBytesAtStart + a.active // the active series' end
	ds.ReservedBytesAtStart = ds.ReservedBytes - a.reserved
	ds.PeakActiveBytes = ds.ActiveBytesAtStart + a.peakActive
	ds.PeakActiveIndex = a.peakIndex
	ds.PeakReservedBytes = ds.ReservedBytesAtStart + a.peakReserved
	for act, n := range a.counts {
		if n > 0 {
			ds.Actions[actions.Name(snapshot.Action(act))] += n
		}
	}
	ds.OOMEvents = a.counts[snapshot.ActionOOM]
	ds.TimeSource = TimeSourceNone
	if a.firstTime != 0 {
		ds.TimeSource = TimeSourceTrace
	}
	if hasTime {
		if a.firstTime != 0 {
			ds.FirstTimeUS, ds.LastTimeUS = ptr(a.firstTime), ptr(a.lastTime)
		}
		if a.peakIndex >= 0 && a.peakTime != 0 {
			ds.PeakActiveTimeUS = ptr(a.peakTime)
		}
	}
	return ds
}

// StatsFile is ComputeStats for a file. Without an index it streams: the
// trace is folded entry by entry and never held, so memory stays near the
// size of the final segments and the shared stacks.
func StatsFile(path string, opts StatsOptions) (*Stats, error) {
	if opts.AtIndex != nil {
		c, err := DecodeFile(path, Options{})
		if err != nil {
			return nil, err
		}
		st, err := ComputeStats(c, opts)
		if st != nil {
			st.Implausible = c.Implausible
		}
		return st, err
	}
	mode := opts.mode
	if mode == noStream {
		mode = streamAuto
	}
	c, accs, err := decodeFileStreaming(path, mode)
	if err != nil {
		return nil, err
	}
	s := c.Snapshot
	hasTime := false
	for _, a := range accs {
		hasTime = hasTime || (a != nil && a.firstTime != 0)
	}
	out := &Stats{Path: c.Path, Kind: "snapshot", Format: c.Format, Schema: c.Schema, SchemaEvidence: c.SchemaEvidence,
		HasTimestamps: hasTime, Devices: []DeviceStats{}, Implausible: c.Implausible}
	devices, err := selectDevices(streamDevices(s, accs), opts.Device)
	if err != nil {
		return nil, err
	}
	for _, dev := range devices {
		a := newTraceAcc()
		if dev < len(accs) && accs[dev] != nil {
			a = accs[dev]
		}
		out.Devices = append(out.Devices, *a.stats(dev, deviceSegments(s, dev), hasTime, s.Actions))
	}
	return out, nil
}

// streamDevices is Snapshot.Devices for a streamed decode, whose traces
// are counted in accumulators instead of kept.
func streamDevices(s *snapshot.Snapshot, accs []*traceAcc) []int {
	n := len(accs)
	for i := range s.Segments {
		n = max(n, s.Segments[i].Device+1)
	}
	var out []int
	for d := 0; d < n; d++ {
		has := d < len(accs) && accs[d] != nil && accs[d].n > 0
		for i := 0; !has && i < len(s.Segments); i++ {
			has = s.Segments[i].Device == d
		}
		if has {
			out = append(out, d)
		}
	}
	return out
}

func selectDevices(devices []int, want *int) ([]int, error) {
	if want == nil {
		return devices, nil
	}
	for _, d := range devices {
		if d == *want {
			return []int{d}, nil
		}
	}
	return nil, fmt.Errorf("device %d is not in this snapshot (devices: %v)", *want, devices)
}

// segmentFigures fills the segment-derived figures from a tiled segment
// list (tiling.FiguresOf).
func segmentFigures(ds *DeviceStats, segs []snapshot.Segment) {
	f := tiling.FiguresOf(segs)
	ds.Segments = f.Segments
	ds.Blocks, ds.LiveBlocks = f.Blocks, f.LiveBlocks
	ds.ReservedBytes, ds.AllocatedBytes, ds.RequestedBytes = f.Reserved, f.Allocated, f.Requested
	ds.InactiveBytes, ds.LargestFreeBlockBytes = f.Free, f.LargestFree
	ds.FreeFragmentation = FreeFragmentation(ds.LargestFreeBlockBytes, ds.InactiveBytes)
	ds.InactiveFraction = InactiveFraction(ds)
}

// FreeFragmentation is 1 − largest free block / total free bytes: how
// scattered the free space of the segment map is (0: one free block, or
// nothing free). It is the one formula behind every free_fragmentation
// figure (docs/json.md).
func FreeFragmentation(largest, free int64) float64 {
	if free <= 0 {
		return 0
	}
	return 1 - LargestFreeRatio(largest, free)
}

// LargestFreeRatio is largest free block / total free bytes, the share of
// the free space one request can use (1 when nothing is free):
// FreeFragmentation is 1 minus it. The exporter's
// npumon_largest_free_block_ratio is this figure (docs/metrics.md).
func LargestFreeRatio(largest, free int64) float64 {
	if free <= 0 {
		return 1
	}
	return float64(largest) / float64(free)
}

func ptr[T any](v T) *T { return &v }

// WriteText prints the stats as a readable table.
func (st *Stats) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s: %s snapshot, %s (%s)", st.Path, st.Format, st.Schema, st.SchemaEvidence)
	if !st.HasTimestamps {
		fmt.Fprint(w, ", no timestamps (indexed by entry)")
	}
	if st.AtIndex != nil {
		fmt.Fprintf(w, ", state after entry %d", *st.AtIndex)
	}
	fmt.Fprintln(w)
	for _, d := range st.Devices {
		fmt.Fprintf(w, "\ndevice %d\n", d.Device)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		row := func(name, value string) { fmt.Fprintf(tw, "  %s\t%s\n", name, value) }
		row("segments", fmt.Sprint(d.Segments))
		row("blocks", fmt.Sprintf("%d (%d live)", d.Blocks, d.LiveBlocks))
		row("reserved", bytesize.Exact(d.ReservedBytes))
		alloc := bytesize.Exact(d.AllocatedBytes)
		if d.EstimatedBlocks > 0 {
			alloc += fmt.Sprintf(", estimate: %d block sizes are round_size(requested)", d.EstimatedBlocks)
		}
		row("allocated", alloc)
		row("active (requested)", bytesize.Exact(d.ActiveBytes))
		row("requested", bytesize.Exact(d.RequestedBytes))
		row("inactive", bytesize.Exact(d.InactiveBytes))
		row("largest free block", bytesize.Exact(d.LargestFreeBlockBytes))
		row("free fragmentation", fmt.Sprintf("%.1f%% (1 − largest free / inactive)", 100*d.FreeFragmentation))
		row("inactive fraction", fmt.Sprintf("%.1f%% (inactive / reserved)", 100*d.InactiveFraction))
		row("trace entries", fmt.Sprint(d.TraceEntries))
		if len(d.Actions) > 0 {
			names := make([]string, 0, len(d.Actions))
			for a := range d.Actions {
				names = append(names, a)
			}
			sort.Strings(names)
			parts := make([]string, len(names))
			for i, a := range names {
				parts[i] = fmt.Sprintf("%s %d", a, d.Actions[a])
			}
			row("actions", strings.Join(parts, ", "))
		}
		if d.TimeRecoveredShare != nil && d.TimeRecoveredFrom != nil {
			row("times", fmt.Sprintf("recovered %.0f %% (of the allocator events) from the profiler's %s records; the rest lie between them", 100**d.TimeRecoveredShare, *d.TimeRecoveredFrom))
		}
		if d.FirstTimeUS != nil {
			row("time span", fmt.Sprintf("%d … %d µs (%.3f s)", *d.FirstTimeUS, *d.LastTimeUS, float64(*d.LastTimeUS-*d.FirstTimeUS)/1e6))
		}
		row("active at start", bytesize.Exact(d.ActiveBytesAtStart))
		peak := bytesize.Exact(d.PeakActiveBytes)
		if d.PeakActiveIndex < 0 {
			peak += " at the start"
		} else {
			peak += fmt.Sprintf(" after entry %d", d.PeakActiveIndex)
			if d.PeakActiveTimeUS != nil {
				peak += fmt.Sprintf(" (%d µs)", *d.PeakActiveTimeUS)
			}
		}
		row("peak active", peak)
		row("reserved at start", bytesize.Exact(d.ReservedBytesAtStart))
		row("peak reserved", bytesize.Exact(d.PeakReservedBytes))
		row("oom events", fmt.Sprint(d.OOMEvents))
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
