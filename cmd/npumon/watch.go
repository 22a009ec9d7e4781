package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/tui"
)

func init() { subcommands = append(subcommands, newWatchCmd) }

func newWatchCmd() *cobra.Command {
	var (
		ascii    bool
		headless time.Duration
		follow   bool
		list     bool
		open     string
	)
	c := &cobra.Command{
		Use:   "watch DIR",
		Short: "Show the memory snapshots and profiler runs landing in a directory",
		Long: "watch follows a directory where a job dumps memory snapshots (_dump_snapshot pickles,\n" +
			"oom_snapshot_*.pickle, their JSON exports) and writes torch_npu profiler directories\n" +
			"(*_ascend_pt). Captures are kept in arrival order; the newest one is opened and, with\n" +
			"--follow (the default), each new one replaces it as it lands. c shows the capture picker:\n" +
			"every capture with its arrival time and size, new ones appearing live; enter opens one\n" +
			"(choosing the newest keeps following, an older one stays put). Profiler ops are read from\n" +
			"the FRAMEWORK files while the profiler still writes them, and shown on the same time axis.\n" +
			"--list prints the captures found so far in arrival order and exits; --open N (the index\n" +
			"--list prints) or --open NAME opens that snapshot instead and stays on it. With --headless\n" +
			"DURATION nothing is drawn: it watches for DURATION and prints the summary as JSON.",
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
			store := monitor.NewStore(monitor.StoreOptions{})
			wd := &dirWatch{dir: dir, store: store, follow: follow && open == "", auto: follow && open == "", pick: open}
			if list {
				return wd.list(c.OutOrStdout())
			}
			if err := wd.start(ctx); err != nil {
				return err
			}
			defer wd.stop()
			opts := tui.Options{Source: store, SourceName: dir, Live: true, ASCII: ascii, Captures: wd}
			if headless > 0 {
				m, err := tui.RunHeadless(ctx, opts, headless)
				if err != nil {
					return err
				}
				wd.stop()
				return wd.writeSummary(c.OutOrStdout(), m.Summary())
			}
			return tui.Run(ctx, opts)
		},
	}
	f := c.Flags()
	f.BoolVar(&follow, "follow", true, "open each new capture as it lands (false: stay on the newest at start)")
	f.BoolVar(&list, "list", false, "print the captures found in DIR in arrival order and exit")
	f.StringVar(&open, "open", "", "open this snapshot (index from --list, or file name) and stay on it")
	f.BoolVar(&ascii, "ascii", false, "draw with ASCII characters only (NO_COLOR drops colour)")
	f.DurationVar(&headless, "headless", 0, "run without a terminal for this long, then print the summary as JSON")
	return c
}

// capture is one snapshot file or profiler directory seen in the directory.
type capture struct {
	Index    int       `json:"index"` // 1-based, in arrival order
	Kind     string    `json:"kind"`  // "snapshot" or "profiler"
	Path     string    `json:"path"`
	Existing bool      `json:"existing"` // there before watch started
	Arrived  time.Time `json:"arrived"`  // when it was seen (its mtime if Existing)
	Size     int64     `json:"size"`     // bytes (a profiler directory: all its files)
	Error    string    `json:"error,omitempty"`
}

// dirWatch feeds a Store from a watched directory: the open snapshot, and
// the ops of every profiler directory, tailed while they grow.
type dirWatch struct {
	dir    string
	store  *monitor.Store
	follow bool       // open each new snapshot as it lands (the picker changes it)
	auto   bool       // --follow as asked
	pick   string     // --open: an index or a file name
	openMu sync.Mutex // one capture is opened at a time (watch loop or picker)

	w      *monitor.Watcher
	tail   *monitor.ProfilerTail
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	captures []capture
	open     string // the capture shown
	ops      int
	errs     []string
}

// list prints the captures already in the directory, oldest first.
func (d *dirWatch) list(out io.Writer) error {
	w, err := monitor.Watch(d.dir, monitor.WatchOptions{Settle: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	defer w.Close()
	// The initial scan reports what exists; it is done once the events
	// stop coming for a moment.
	enc := json.NewEncoder(out)
	n := 0
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if c, ok := captureOf(ev); ok {
				n++
				c.Index = n
				if err := enc.Encode(c); err != nil {
					return err
				}
			}
		case <-time.After(300 * time.Millisecond):
			return nil
		}
	}
}

func captureOf(ev monitor.WatchEvent) (capture, bool) {
	var c capture
	switch ev.Kind {
	case monitor.WatchSnapshot:
		c = capture{Kind: "snapshot", Path: ev.Path, Existing: ev.Existing, Size: ev.Size}
	case monitor.WatchProfilerDir:
		c = capture{Kind: "profiler", Path: ev.Path, Existing: ev.Existing, Size: treeSize(ev.Path)}
	default:
		return capture{}, false
	}
	c.Arrived = time.Now()
	if st, err := os.Stat(ev.Path); err == nil {
		if ev.Existing {
			c.Arrived = st.ModTime()
		}
		if c.Kind == "snapshot" {
			c.Size = st.Size()
		}
	}
	return c, true
}

// treeSize is the size of the files under dir (a profiler directory).
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

func (d *dirWatch) start(ctx context.Context) error {
	w, err := monitor.Watch(d.dir, monitor.WatchOptions{})
	if err != nil {
		return err
	}
	tail, err := monitor.NewProfilerTail(d.dir, d.store)
	if err != nil {
		w.Close()
		return err
	}
	d.w, d.tail = w, tail
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go d.loop(ctx)
	return nil
}

func (d *dirWatch) stop() {
	d.once.Do(func() {
		if d.cancel == nil {
			return
		}
		d.cancel()
		d.w.Close()
		<-d.done
	})
}

// loop handles watch events and polls the profiler tail. Existing
// snapshots come first (the scan); the newest of them is opened once the
// scan is over, later ones as they land (with follow).
func (d *dirWatch) loop(ctx context.Context) {
	defer close(d.done)
	var newestExisting string
	scanOver := time.NewTimer(300 * time.Millisecond)
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	d.pollTail()
	for {
		select {
		case <-ctx.Done():
			return
		case <-scanOver.C:
			switch {
			case d.pick != "" && d.current() == "":
				d.note(fmt.Sprintf("--open %s: no such snapshot in %s (yet)", d.pick, d.dir))
			case newestExisting != "" && d.current() == "":
				d.openSnapshot(newestExisting)
			}
		case <-poll.C:
			d.pollTail()
		case ev, ok := <-d.w.Events:
			if !ok {
				return
			}
			var c capture
			if cc, ok := captureOf(ev); ok {
				c = d.addCapture(cc)
			}
			switch ev.Kind {
			case monitor.WatchSnapshot:
				switch {
				case d.pick != "":
					if d.current() == "" && (strconv.Itoa(c.Index) == d.pick || filepath.Base(c.Path) == filepath.Base(d.pick)) {
						d.openSnapshot(ev.Path)
					}
				case ev.Existing:
					newestExisting = ev.Path
				case d.following() || d.current() == "":
					d.openSnapshot(ev.Path)
				}
			case monitor.WatchProfilerDir, monitor.WatchFrameworkGrow, monitor.WatchAnalyseDone:
				d.pollTail()
				if ev.Kind != monitor.WatchProfilerDir {
					d.update(ev.Dir, func(c *capture) { c.Size = treeSize(c.Path) })
				}
			case monitor.WatchRemoved:
				d.update(ev.Path, func(c *capture) { c.Error = "removed" })
			case monitor.WatchError:
				d.note(fmt.Sprintf("%s: %v", ev.Path, ev.Err))
			}
		}
	}
}

func (d *dirWatch) current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open
}

// addCapture records a capture in arrival order; a snapshot rewritten in
// place keeps its place (and its index) with the new size.
func (d *dirWatch) addCapture(c capture) capture {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.captures {
		if d.captures[i].Path == c.Path {
			d.captures[i].Size, d.captures[i].Error = c.Size, ""
			return d.captures[i]
		}
	}
	c.Index = len(d.captures) + 1
	d.captures = append(d.captures, c)
	return c
}

// update changes the capture at path, if there is one.
func (d *dirWatch) update(path string, fn func(*capture)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.captures {
		if d.captures[i].Path == path {
			fn(&d.captures[i])
		}
	}
}

// openSnapshot decodes path and makes it the Store's memory data; the ops
// gathered from profiler directories stay.
func (d *dirWatch) openSnapshot(path string) {
	if err := d.openCapture(path, "snapshot"); err != nil {
		d.note(err.Error())
	}
}

// openCapture makes a snapshot, or the memory records of a profiler
// directory, the Store's memory data. Ops are not re-read: the profiler
// tail has them all already.
func (d *dirWatch) openCapture(path, kind string) error {
	d.openMu.Lock()
	defer d.openMu.Unlock()
	var err error
	if kind == "profiler" {
		var pd *profiler.Data
		if pd, err = profiler.ReadDir(path); err == nil {
			snap := monitor.ProfilerTrace(pd)
			if len(snap.DeviceTraces) == 0 {
				err = fmt.Errorf("%s: no memory records with addresses (its ops are on the timeline)", path)
			} else {
				err = d.store.IngestSnapshot(snap)
			}
		}
	} else {
		var c *replay.Capture
		if c, err = replay.DecodeFile(path, replay.Options{}); err == nil {
			err = d.store.IngestSnapshot(c.Snapshot)
		}
	}
	if err != nil {
		d.update(path, func(c *capture) { c.Error = err.Error() })
		return err
	}
	d.mu.Lock()
	d.open = path
	d.mu.Unlock()
	d.update(path, func(c *capture) { c.Error = "" })
	return nil
}

// List is the capture picker's list (tui.Captures), oldest first.
func (d *dirWatch) List() []tui.Capture {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]tui.Capture, len(d.captures))
	for i, c := range d.captures {
		out[i] = tui.Capture{Path: c.Path, Kind: c.Kind, Arrived: c.Arrived, Size: c.Size, Open: c.Path == d.open, Err: c.Error}
	}
	return out
}

// Open opens a capture chosen in the picker (tui.Captures). Choosing the
// newest snapshot keeps following new ones (with --follow); any other
// choice stays put until the next choice.
func (d *dirWatch) Open(path string) error {
	d.mu.Lock()
	kind, newest := "", ""
	for _, c := range d.captures {
		if c.Path == path {
			kind = c.Kind
		}
		if c.Kind == "snapshot" {
			newest = c.Path
		}
	}
	d.mu.Unlock()
	if kind == "" {
		return fmt.Errorf("%s: not a capture of %s", path, d.dir)
	}
	if err := d.openCapture(path, kind); err != nil {
		return err
	}
	d.mu.Lock()
	d.follow = d.auto && path == newest
	d.mu.Unlock()
	return nil
}

// pollTail appends the ops the profiler tail found since the last poll.
func (d *dirWatch) pollTail() {
	n, err := d.tail.Poll()
	if err != nil {
		d.note(err.Error())
	}
	if n > 0 {
		d.mu.Lock()
		d.ops += n
		d.mu.Unlock()
	}
}

func (d *dirWatch) note(msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) < 100 {
		d.errs = append(d.errs, msg)
	}
}

// following reports whether new snapshots are opened as they land.
func (d *dirWatch) following() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.follow
}

// watchSummaryJSON is replay's summary plus what the watch saw.
type watchSummaryJSON struct {
	replaySummaryJSON
	Open     string    `json:"open"`
	Captures []capture `json:"captures"`
	Ops      int       `json:"ops"`
	Errors   []string  `json:"errors,omitempty"`
}

func (d *dirWatch) writeSummary(w io.Writer, s monitor.Summary) error {
	d.mu.Lock()
	out := watchSummaryJSON{replaySummaryJSON: replaySummary(d.dir, s), Open: d.open,
		Captures: append([]capture{}, d.captures...), Ops: d.ops, Errors: d.errs}
	d.mu.Unlock()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
