package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif/sim"
	"github.com/npumon/npumon/tui"
	"github.com/npumon/npumon/tui/rankview"
)

func init() { subcommands = append(subcommands, newReplayCmd) }

func newReplayCmd() *cobra.Command {
	var (
		device   int
		speed    float64
		play     bool
		relative bool
		ascii    bool
		headless time.Duration
		confs    []string
		profDirs []string
	)
	var smi *npuSMIFlags // set below, read when the command runs
	c := &cobra.Command{
		Use:   "replay PATH",
		Short: "Scrub through a saved memory snapshot or profiler directory in the terminal UI",
		Long: "replay opens a memory snapshot (torch / torch_npu _dump_snapshot pickle, or its JSON\n" +
			"export) or a torch_npu profiler directory (*_ascend_pt: ops, and the memory records of\n" +
			"raw FRAMEWORK data as a trace) in the terminal UI: timeline, segment map, event trace\n" +
			"and op table share one time cursor you move like a video (space plays, ←/→ step,\n" +
			"? lists every key). A directory holding several ranks' captures (docs/ranks.md) opens\n" +
			"the ranks overview: every rank side by side; enter opens one, esc comes back. A job's\n" +
			"dump directory (snapshots and *_ascend_pt runs side by side, as demo --out writes it)\n" +
			"opens its newest snapshot with the ops of every profiler run of the same process (the pid\n" +
			"in the names, docs/files.md); c lists the other captures. watch DIR follows one live.\n" +
			"Without --device the source's first device is shown.\n" +
			"With --headless DURATION nothing is drawn: the file is loaded, played (with --play)\n" +
			"for DURATION and the summary at the final cursor is printed as JSON.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			path := args[0]
			if err := checkSpeed(speed); err != nil {
				return err
			}
			if !c.Flags().Changed("device") {
				device = -1 // the source's first device, whichever it is (tui.Options.Device)
			}
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			if st.IsDir() {
				members, err := jobdir.Find(path)
				if err != nil {
					return err
				}
				if members != nil {
					return replayRanks(c.OutOrStdout(), path, members, ascii, headless)
				}
			}
			store := store.New(store.Options{})
			var capt atomic.Pointer[replay.Capture] // for w, the what-if view
			var note atomic.Value                   // the line for data without a block-level trace
			note.Store("")
			load := func(ctx context.Context, report func(tui.Progress)) error {
				var runs []*profiler.Data
				var times string
				prepare := func(c *replay.Capture) error {
					var warn strings.Builder // no stderr under the UI: the refusals join the note
					res, data, err := recoverTimesRuns(c, profDirs, &warn)
					runs, times = data, strings.TrimSpace(strings.Join([]string{recoveredNote(res, device), strings.TrimSpace(warn.String())}, " "))
					return err
				}
				lo := watch.LoadOptions{Report: report, DropTrace: true}
				if len(profDirs) == 0 && len(runsBeside(path)) == 0 {
					// no runs to take times from: the trace streams into
					// the Store as it is decoded (as stats streams it)
					lo.Stream = true
				} else {
					lo.Prepare = prepare // time recovery needs the whole trace first
				}
				l, err := watch.Load(ctx, path, store, lo)
				capt.Store(l.Capture)
				n := watch.NoBlockTrace(l.Profiler)
				if times != "" {
					n = times
				}
				note.Store(n)
				if err == nil {
					for _, d := range runs { // their ops, now on the trace's time axis
						store.IngestOps(watch.ProfilerOps(d.Ops, d.OpMemDeltas()))
					}
				}
				return err
			}
			// A job's dump directory opens its newest snapshot with the
			// profiler runs of its process (classify.ResolveJob).
			job, isJob, err := jobInput(path)
			if err != nil {
				return err
			}
			var captures tui.Captures
			if isJob {
				path = job.Open()
				if st, err = os.Stat(path); err != nil {
					return err
				}
				load = func(ctx context.Context, report func(tui.Progress)) error {
					var times string // LoadJob ingests the runs' ops itself
					prepare := func(c *replay.Capture) error {
						var warn strings.Builder
						res, _, err := recoverTimesRuns(c, profDirs, &warn)
						times = strings.TrimSpace(recoveredNote(res, device) + " " + strings.TrimSpace(warn.String()))
						return err
					}
					l, err := watch.LoadJob(ctx, job, store, watch.LoadOptions{Report: report, Prepare: prepare, DropTrace: true})
					capt.Store(l.Capture)
					n := watch.NoBlockTrace(l.Profiler)
					if times != "" {
						n = times
					}
					note.Store(n)
					return err
				}
				jc := watch.NewJobCaptures(job, store, watch.LoadOptions{})
				jc.OnOpen = func(c *replay.Capture) { capt.Store(c) } // w and the side files follow the picker
				captures = jc
			}
			// Loading runs behind the UI; what cannot be read is refused up front.
			in, err := classifyInput(path)
			if err != nil {
				return err
			}
			if !in.Kind.Snapshot() && !in.Kind.Profiler() {
				return unreadable(in)
			}
			snapshot := !in.Kind.Profiler()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			var quick func() error
			if !st.IsDir() && snapshot {
				// A large truncated pickle is refused before the UI too.
				quick = func() error { return replay.CheckComplete(path) }
			}
			grace := preloadGrace
			if !st.IsDir() && st.Size() <= smallInput {
				grace = time.Minute // a small file is read whole before the UI opens
			}
			load, err = preload(ctx, load, store, device, grace, quick)
			if err != nil {
				return err
			}
			opts := tui.Options{
				Source:     store,
				SourceName: filepath.Base(filepath.Clean(args[0])),
				Captures:   captures,
				Load:       load,
				ASCII:      ascii,
				Device:     device,
				Speed:      speed,
				Play:       play,
				Relative:   relative,
				Note:       func() string { return note.Load().(string) },
			}
			if snapshot {
				// the Store holds the trace (DropTrace); w gets it back
				whatIf := func() *replay.Capture { return watch.WithTrace(capt.Load(), store) }
				opts.WhatIf, opts.WhatIfConfs, opts.Simulate = whatIf, confs, sim.Simulate
				opts.MemUsage = memUsageOf(func() string {
					if c := capt.Load(); c != nil {
						return c.Path
					}
					return ""
				}, store.Devices)
			}
			feed, stopFeed, err := hostDevices(ctx, smi)
			if err != nil {
				return err
			}
			defer stopFeed()
			opts.Devices = feed
			if headless > 0 {
				m, err := tui.RunHeadless(ctx, opts, headless)
				if err != nil {
					return err
				}
				kind := summaryTrace
				if !snapshot {
					kind = summaryProfiler
				}
				out := replaySummary(args[0], m.Summary(), kind)
				out.Note = note.Load().(string)
				if isJob {
					ops, _, _ := store.OpsSince(0)
					return writeJSON(c.OutOrStdout(), replayJobJSON{out, path, job.Runs, len(ops), job.Why})
				}
				return writeJSON(c.OutOrStdout(), out)
			}
			return tui.Run(ctx, opts)
		},
	}
	smi = addNPUSMIFlags(c)
	f := c.Flags()
	f.IntVar(&device, "device", 0, "device to show first (default: the source's first)")
	f.Float64Var(&speed, "speed", 1, "replay speed, ×0.01 to ×1024 ([ and ] change it)")
	f.BoolVar(&play, "play", false, "start playing from the beginning")
	f.BoolVar(&relative, "relative", false, "show times relative to the first entry (r toggles)")
	f.BoolVar(&ascii, "ascii", false, "draw with ASCII characters only (NO_COLOR drops colour)")
	f.StringArrayVar(&confs, "conf", nil, "an allocator configuration w (what-if) compares, as npumon whatif --conf (repeatable)")
	f.DurationVar(&headless, "headless", 0, "run without a terminal for this long after loading, then print the summary as JSON")
	f.StringArrayVar(&profDirs, "profiler", nil, profilerFlagHelp)
	return c
}

// replaySummaryJSON is the --headless output of every TUI command; each
// name means what it means in `npumon stats --json` (docs/json.md). Times
// (cursor, first_time, last_time, peak_active_time) are in time_base units.
// Figures of the segment map are null for a source without one (profiler
// data).
type replaySummaryJSON struct {
	Source    string `json:"source"`
	Device    int    `json:"device"`
	TimeBase  string `json:"time_base"`
	Cursor    int64  `json:"cursor"`
	Applied   int64  `json:"applied"`
	Entries   int64  `json:"entries"`
	FirstTime int64  `json:"first_time"`
	LastTime  int64  `json:"last_time"`
	// ActiveBytes is the active series (requested bytes of live allocations).
	ActiveBytes int64 `json:"active_bytes"`
	// AllocatedBytes is Σ rounded block sizes of active_allocated blocks
	// (the segment map's), or the allocated bytes profiler records state.
	AllocatedBytes *int64 `json:"allocated_bytes"`
	// RequestedBytes is Σ requested bytes of allocated (not pending-free)
	// allocations; null for profiler records, which carry no requests.
	RequestedBytes        *int64   `json:"requested_bytes"`
	ReservedBytes         int64    `json:"reserved_bytes"`
	Segments              *int     `json:"segments"`
	Blocks                *int     `json:"blocks"`
	LiveBlocks            *int     `json:"live_blocks"`
	LargestFreeBlockBytes *int64   `json:"largest_free_block_bytes"`
	InactiveBytes         *int64   `json:"inactive_bytes"`
	FreeFragmentation     *float64 `json:"free_fragmentation"`
	PeakActiveBytes       int64    `json:"peak_active_bytes"`
	// PeakActiveTime is null when the peak is the state before the first entry.
	PeakActiveTime    *int64 `json:"peak_active_time"`
	PeakReservedBytes int64  `json:"peak_reserved_bytes"`
	// PeakScope says what the peaks cover: "capture" (everything the source
	// holds) or "since attach" (only what a live client has seen).
	PeakScope string `json:"peak_scope"`
	OOMs      int    `json:"ooms"`
	// Note says what a source lacks (e.g. no block-level trace).
	Note string `json:"note,omitempty"`
	// Live commands only (docs/retention.md): the --retain policy, the
	// entries before its window (their detail was thinned) and the cursor
	// from which the detail is held (absent while nothing was thinned).
	Retain         *string `json:"retain,omitempty"`
	ThinnedEntries *int64  `json:"thinned_entries,omitempty"`
	DetailFrom     *int64  `json:"detail_from,omitempty"`
}

// replayJobJSON is the --headless output of replay on a job's dump
// directory: the summary, the capture opened and the profiler runs whose
// ops were read with it (docs/files.md).
type replayJobJSON struct {
	replaySummaryJSON
	Open     string   `json:"open"`
	Profiler []string `json:"profiler"`
	Ops      int      `json:"ops"` // ops on the time axis (the runs', or a snapshot's annotations)
	// Why says why runs in the directory were left out, if any were.
	Why string `json:"profiler_note,omitempty"`
}

// summaryKind says what a summary's source holds.
type summaryKind int

const (
	summaryTrace    summaryKind = iota // a snapshot or live trace: a segment map
	summaryProfiler                    // profiler records: totals only, no segment map
	summaryAttach                      // a live client: a segment map, peaks since attach
)

// replaySummary fills the --headless JSON from a Summary, so that every
// TUI command prints the same fields.
func replaySummary(source string, s store.Summary, kind summaryKind) replaySummaryJSON {
	out := replaySummaryJSON{
		Source: source, Device: s.Device, TimeBase: s.TimeBase.String(), Cursor: s.Cursor, Applied: s.Applied,
		Entries: s.Entries, FirstTime: s.FirstTime, LastTime: s.LastTime, ActiveBytes: s.ActiveBytes,
		ReservedBytes: s.ReservedBytes, PeakActiveBytes: s.PeakActiveBytes, PeakReservedBytes: s.PeakReservedBytes,
		OOMs: s.OOMs, PeakScope: "capture",
	}
	if !s.PeakActiveAtStart {
		out.PeakActiveTime = &s.PeakActiveTime
	}
	if kind == summaryProfiler {
		out.AllocatedBytes = &s.AllocatedBytes
		return out
	}
	if kind == summaryAttach {
		out.PeakScope = "since attach"
	}
	out.AllocatedBytes, out.RequestedBytes = &s.MapAllocatedBytes, &s.AllocatedBytes
	out.Segments, out.Blocks, out.LiveBlocks = &s.Segments, &s.Blocks, &s.LiveBlocks
	out.LargestFreeBlockBytes, out.InactiveBytes, out.FreeFragmentation = &s.LargestFreeBlock, &s.TotalFreeBytes, &s.Fragmentation
	return out
}

// checkSpeed refuses a replay speed outside the range the UI's [ and ] keys
// step through (×0.01 … ×1024).
func checkSpeed(v float64) error {
	if !(v >= tui.MinSpeed && v <= tui.MaxSpeed) {
		return usageError{fmt.Errorf("--speed must be between %g and %g, got %v", tui.MinSpeed, tui.MaxSpeed, v)}
	}
	return nil
}

// replayRanks opens the ranks overview of a directory (or, headless, loads
// every rank and prints their figures).
func replayRanks(w io.Writer, dir string, members []jobdir.Member, ascii bool, headless time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rs := ranksFromMembers(members)
	if headless > 0 {
		if err := loadRanks(ctx, rs); err != nil {
			return err
		}
		return writeRanksSummary(w, dir, rs)
	}
	return rankview.Run(ctx, rankview.Options{Title: filepath.Base(filepath.Clean(dir)), Ranks: rs, ASCII: ascii, Open: openRank(nil)})
}
