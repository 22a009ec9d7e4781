package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/tui"
	"github.com/npumon/npumon/tui/rankview"
)

func init() { subcommands = append(subcommands, newWatchCmd) }

func newWatchCmd() *cobra.Command {
	var (
		ascii    bool
		headless time.Duration
		follow   bool
		list     bool
		open     string
		mf       metricsFlag
		maxSize  = sizeFlag(watch.DefaultMaxBytes)
	)
	var smi *npuSMIFlags // set below, read when the command runs
	rf := newRetainFlag()
	c := &cobra.Command{
		Use:   "watch DIR",
		Short: "Show the memory snapshots and profiler runs landing in a directory",
		Long: "watch follows a directory where a job dumps memory snapshots (_dump_snapshot pickles,\n" +
			"oom_snapshot_*.pickle, their JSON exports) and writes torch_npu profiler directories\n" +
			"(*_ascend_pt). Captures are kept in arrival order (their modification time) and numbered\n" +
			"from 1 in it, one numbering for the picker, --list and --open N (docs/tui.md); the newest\n" +
			"one is opened and, with --follow (the default), each new one replaces it\n" +
			"as it lands — except while you work in the view (paused, a block selected, the what-if\n" +
			"view open): then the open capture stays, the header counts the new ones and f opens the\n" +
			"newest and follows again. c shows the capture picker: every capture with its arrival time\n" +
			"and size (one that cannot be read, with its error), new ones appearing live; enter opens one\n" +
			"(choosing the newest keeps following, an older one stays put). Profiler ops are read from\n" +
			"the FRAMEWORK files while the profiler still writes them, and shown on the same time axis.\n" +
			"A snapshot without times (torch_npu's) gets them from the complete profiler runs of its\n" +
			"process in DIR as it opens, and again when one completes later (docs/timerecovery.md);\n" +
			"the header says \"times recovered 97 %\".\n" +
			"--list prints the captures found so far in arrival order (one still being written too,\n" +
			"\"writing\": true) and exits; --open N (the index\n" +
			"--list prints) or --open NAME opens that snapshot instead and stays on it. With --headless\n" +
			"DURATION nothing is drawn: it watches for DURATION and prints the summary as JSON.\n" +
			"A directory holding several ranks' captures (docs/ranks.md) opens the ranks overview;\n" +
			"each rank{N} directory is watched as above, other ranks' captures are read once.",
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			dir := args[0]
			if st, err := os.Stat(dir); err != nil {
				return err
			} else if !st.IsDir() {
				return usageError{fmt.Errorf("%s: not a directory (use npumon replay for a file)", dir)}
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if list {
				enc := json.NewEncoder(c.OutOrStdout())
				return watch.ScanDir(dir, func(c capture.Entry) error { return enc.Encode(c) })
			}
			if open == "" {
				members, err := jobdir.Find(dir)
				if err != nil {
					return err
				}
				if members != nil {
					return watchRanks(ctx, c.OutOrStdout(), c.ErrOrStderr(), dir, members, follow, ascii, headless, &mf)
				}
			}
			store := store.New(rf.storeOptions())
			wd := watch.NewDirSource(dir, store, watch.DirOptions{Follow: follow, Pick: open, MaxBytes: int64(maxSize)})
			if err := wd.Start(ctx); err != nil {
				return err
			}
			defer wd.Stop()
			stopMetrics, err := mf.start(c.ErrOrStderr(), "npumon watch", metrics.Target{Store: store, Rank: -1, Source: dirSource(dir), Name: dir})
			if err != nil {
				return err
			}
			defer stopMetrics()
			opts := tui.Options{Source: store, SourceName: dir, Live: true, ASCII: ascii, Captures: wd, Note: wd.TimesNote, MemUsage: wd.MemUsage}
			feed, stopFeed, err := hostDevices(ctx, smi)
			if err != nil {
				return err
			}
			defer stopFeed()
			opts.Devices = feed
			if headless > 0 {
				// The window counts from the scan's capture being open, as
				// replay's counts from the end of loading.
				select {
				case <-wd.Ready():
				case <-ctx.Done():
				}
				m, err := tui.RunHeadless(ctx, opts, headless)
				if err != nil {
					return err
				}
				wd.Stop()
				return writeWatchSummary(c.OutOrStdout(), dir, wd, m.Summary(), rf.r)
			}
			return tui.Run(ctx, opts)
		},
	}
	smi = addNPUSMIFlags(c)
	f := c.Flags()
	f.BoolVar(&follow, "follow", true, "open each new capture as it lands (false: stay on the newest at start)")
	f.BoolVar(&list, "list", false, "print the captures found in DIR in arrival order and exit")
	f.StringVar(&open, "open", "", "open this snapshot (index from --list, or file name) and stay on it")
	f.Var(&maxSize, "max-size", "snapshot files larger than this are listed with an error, not opened")
	f.BoolVar(&ascii, "ascii", false, "draw with ASCII characters only (NO_COLOR drops colour)")
	f.DurationVar(&headless, "headless", 0, "run without a terminal for this long, then print the summary as JSON")
	mf.register(f)
	rf.register(f)
	return c
}

// watchSummaryJSON is replay's summary plus what the watch saw.
type watchSummaryJSON struct {
	replaySummaryJSON
	Open     string          `json:"open"`
	Captures []capture.Entry `json:"captures"`
	Ops      int             `json:"ops"`
	Errors   []string        `json:"errors,omitempty"`
}

func writeWatchSummary(w io.Writer, dir string, d *watch.DirSource, s store.Summary, ret store.Retention) error {
	kind := summaryTrace
	for _, c := range d.List() {
		if c.Path == d.Current() && c.Kind == capture.Profiler {
			kind = summaryProfiler
		}
	}
	out := watchSummaryJSON{replaySummaryJSON: replaySummary(dir, s, kind), Open: d.Current(),
		Captures: d.List(), Ops: d.Ops(), Errors: d.Errors()}
	withRetention(&out.replaySummaryJSON, s, ret)
	return writeJSON(w, out)
}

// watchRanks shows the ranks overview of a directory: a rank directory is
// watched (its newest capture, following new ones), a rank's file or
// profiler directory in dir itself is read once.
func watchRanks(ctx context.Context, out, errOut io.Writer, dir string, members []jobdir.Member, follow, ascii bool,
	headless time.Duration, mf *metricsFlag) error {
	rs := ranksFromMembers(members)
	sources := map[int]*watch.DirSource{}
	var targets []metrics.Target
	for i, m := range members {
		if rdir := filepath.Dir(m.Path); filepath.Clean(rdir) != filepath.Clean(dir) && m.Kind == capture.Snapshot {
			wd := watch.NewDirSource(rdir, rs[i].Store, watch.DirOptions{Follow: follow})
			if err := wd.Start(ctx); err != nil {
				return err
			}
			defer wd.Stop()
			rs[i].Load, rs[i].Name = nil, filepath.Base(rdir)
			sources[m.Rank] = wd
		}
		targets = append(targets, metrics.Target{Store: rs[i].Store, Rank: m.Rank, Source: dirSource(dir), Name: dir})
	}
	stopMetrics, err := mf.start(errOut, "npumon watch", targets...)
	if err != nil {
		return err
	}
	defer stopMetrics()
	if headless > 0 {
		if err := loadRanks(ctx, rs); err != nil {
			return err
		}
		// the window counts from every watched rank's capture being open,
		// as a single directory's does
		for _, wd := range sources {
			select {
			case <-wd.Ready():
			case <-ctx.Done():
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(headless):
		}
		return writeRanksSummary(out, dir, rs)
	}
	return rankview.Run(ctx, rankview.Options{Title: filepath.Base(filepath.Clean(dir)), Ranks: rs, Live: true, ASCII: ascii,
		Open: openRank(func(r rankview.Rank) tui.Captures {
			if wd := sources[r.Rank]; wd != nil {
				return wd
			}
			return nil
		})})
}
