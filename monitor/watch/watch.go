package watch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/memusage"
)

// EventKind is what an Event reports.
type EventKind uint8

const (
	// EventSnapshot: a snapshot file (pickle or JSON, including
	// oom_snapshot_*) is complete: its size was stable for Settle and
	// Check accepted it. Reported again when it is rewritten.
	EventSnapshot EventKind = iota + 1
	// EventProfilerDir: a *_ascend_pt directory appeared.
	EventProfilerDir
	// EventAnalyseDone: a profiler directory's analyse.done appeared.
	EventAnalyseDone
	// EventFrameworkGrow: a FRAMEWORK/torch.* file grew (Size = new size).
	EventFrameworkGrow
	// EventRemoved: a reported file or directory was deleted or renamed away.
	EventRemoved
	// EventError: something could not be read (unreadable or undecodable
	// file, vanished directory). Never fatal: watching goes on.
	EventError
	// EventScanDone: the initial scan is over; every Existing event came
	// before it.
	EventScanDone
	// EventMemUsage: a torch_npu memUsageInfo CSV
	// (device_<N>_memUsageInfo_<YYYYmmddHHMMSS>.csv, replay/memusage) is
	// complete: its size was stable for Settle and it parses. Reported
	// again when it is rewritten; one that never parses is an EventError.
	EventMemUsage
	// EventWriting: a snapshot file is there but not complete yet (still
	// being written, or cut short and changed within GiveUp): reported once
	// per version when first seen, Err saying why it is not complete; an
	// EventSnapshot, EventError or EventRemoved follows.
	EventWriting
	// EventRunComplete: a profiler directory's profiler_info*.json was
	// written (its FRAMEWORK data finalised). Reported for each write,
	// not for the initial scan.
	EventRunComplete
)

func (k EventKind) String() string {
	switch k {
	case EventSnapshot:
		return "snapshot"
	case EventProfilerDir:
		return "profiler_dir"
	case EventAnalyseDone:
		return "analyse_done"
	case EventFrameworkGrow:
		return "framework_grow"
	case EventRemoved:
		return "removed"
	case EventError:
		return "error"
	case EventScanDone:
		return "scan_done"
	case EventMemUsage:
		return "mem_usage"
	case EventWriting:
		return "writing"
	case EventRunComplete:
		return "run_complete"
	}
	return "unknown"
}

// Event is one thing a Watcher saw.
type Event struct {
	Kind     EventKind
	Path     string // the file or directory
	Dir      string // the profiler directory, for profiler events
	Size     int64
	Err      error // EventError only
	Existing bool  // found by the initial scan rather than appearing later
}

// Options tune Watch.
type Options struct {
	// Settle is how long a snapshot file's size and mtime must stay
	// unchanged before it is opened (default 300 ms).
	Settle time.Duration
	// Check decides whether a settled candidate is a complete snapshot
	// (e.g. replay.DecodeFile). Default: a pickle must end with STOP, a
	// JSON file must parse with a snapshot shape.
	Check func(path string) error
	// GiveUp is how long a settled file may fail Check before a EventError
	// reports it (default 10 × Settle); it is retried when it changes.
	GiveUp time.Duration
	// MaxBytes: a snapshot file larger than this is reported as a
	// EventError (once per size) and never checked or opened (default
	// DefaultMaxBytes).
	MaxBytes int64
}

// DefaultMaxBytes is the largest snapshot file a watch opens by
// default.
const DefaultMaxBytes = 1 << 30

// Watcher watches one directory. Events is closed after Close.
type Watcher struct {
	Events <-chan Event

	dir    string
	opts   Options
	fs     *fsnotify.Watcher
	out    chan Event
	done   chan struct{}
	closed sync.Once
	wg     sync.WaitGroup

	// owned by the loop goroutine
	pending  map[string]*candidate // snapshot files not yet reported
	reported map[string]bool       // snapshot files reported (for EventRemoved)
	profDirs map[string]bool
	analysed map[string]bool
	fwSize   map[string]int64 // FRAMEWORK files: last reported size
	fwDirty  map[string]bool
	rootGone bool
}

type candidate struct {
	size     int64
	mod      time.Time
	since    time.Time // last change
	failed   bool      // Check failed since the last change
	reported bool      // EventError sent for the current version
	tooBig   bool      // over MaxBytes: reported, not checked
	writing  bool      // EventWriting sent (its removal is reported)
}

// Watch starts watching dir (not recursively: snapshot files in dir, and
// profiler directories directly inside it with their FRAMEWORK and
// ASCEND_PROFILER_OUTPUT subdirectories). Files already there are reported
// first with Existing set.
func Watch(dir string, opts Options) (*Watcher, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("watch: %s: not a directory", dir)
	}
	if opts.Settle <= 0 {
		opts.Settle = 300 * time.Millisecond
	}
	if opts.GiveUp <= 0 {
		opts.GiveUp = 10 * opts.Settle
	}
	if opts.Check == nil {
		opts.Check = replay.CheckComplete
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	out := make(chan Event, 256)
	w := &Watcher{Events: out, out: out, dir: filepath.Clean(dir), opts: opts, fs: fw, done: make(chan struct{}),
		pending: map[string]*candidate{}, reported: map[string]bool{}, profDirs: map[string]bool{},
		analysed: map[string]bool{}, fwSize: map[string]int64{}, fwDirty: map[string]bool{}}
	if err := fw.Add(w.dir); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watch: %s: %w", dir, err)
	}
	w.wg.Add(1)
	go func() { defer crash.Recover(); w.loop() }()
	return w, nil
}

// Close stops watching and closes Events.
func (w *Watcher) Close() error {
	var err error
	w.closed.Do(func() {
		close(w.done)
		err = w.fs.Close()
		w.wg.Wait()
		close(w.out)
	})
	return err
}

func (w *Watcher) emit(e Event) bool {
	select {
	case w.out <- e:
		return true
	case <-w.done:
		return false
	}
}

func (w *Watcher) loop() {
	defer w.wg.Done()
	w.scanRoot(true)
	if !w.emit(Event{Kind: EventScanDone, Path: w.dir}) {
		return
	}
	tick := time.NewTicker(max(w.opts.Settle/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// the kernel dropped events (files arrived faster than
				// they were read): look at everything again
				w.scanRoot(false)
				continue
			}
			w.emit(Event{Kind: EventError, Path: w.dir, Err: err})
		case <-tick.C:
			w.tick()
		}
	}
}

// IsSnapshotName reports whether a file in a watched directory may be a
// memory snapshot: *.pickle, *.pkl, *.json, oom_snapshot_* (ranks of a job
// are found by the same rule).
func IsSnapshotName(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false // editors' and atomic writers' temporaries
	}
	if strings.HasPrefix(name, "oom_snapshot_") {
		return true
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".pickle", ".pkl", ".json":
		return true
	}
	return false
}

// isWatchedName: the files in the root a Watcher reports: snapshots and
// torch_npu's memUsageInfo CSVs.
func isWatchedName(name string) bool {
	return IsSnapshotName(name) || memusage.IsName(name)
}

// checkMemUsage is the Check of a memUsageInfo CSV: it parses.
func checkMemUsage(p string) error {
	_, err := memusage.Read(p)
	return err
}

// scanRoot looks at everything in the root (start, or the root came back).
func (w *Watcher) scanRoot(existing bool) {
	ents, err := os.ReadDir(w.dir)
	if errors.Is(err, os.ErrNotExist) {
		w.removed(w.dir)
		return
	}
	if err != nil {
		w.emit(Event{Kind: EventError, Path: w.dir, Err: err})
		return
	}
	for _, e := range ents {
		p := filepath.Join(w.dir, e.Name())
		if e.IsDir() {
			w.dirAppeared(p, existing)
		} else if isWatchedName(e.Name()) && !w.reported[p] {
			w.candidate(p, existing)
		}
	}
}

func (w *Watcher) candidate(p string, existing bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return // gone already
	}
	if !fi.Mode().IsRegular() {
		// a FIFO or device would block the open; report it once
		if !w.reported[p] {
			w.reported[p] = true
			w.emit(Event{Kind: EventError, Path: p, Err: fmt.Errorf("%s: not a regular file (%v)", p, fi.Mode().Type())})
		}
		return
	}
	c, ok := w.pending[p]
	if !ok {
		c = &candidate{}
		w.pending[p] = c
		if existing {
			// an existing file that is already stable is checked at once
			c.since = time.Now().Add(-w.opts.Settle)
			c.size, c.mod = fi.Size(), fi.ModTime()
			w.settle(p, c, existing)
			return
		}
	}
	if fi.Size() != c.size || !fi.ModTime().Equal(c.mod) {
		c.size, c.mod, c.since, c.failed, c.reported, c.tooBig = fi.Size(), fi.ModTime(), time.Now(), false, false, false
	}
	if !ok && c.size <= w.opts.MaxBytes && !memusage.IsName(filepath.Base(p)) {
		// a new snapshot: listed as being written until it settles (a side
		// file is no capture: it is reported once complete)
		w.writing(p, c, errors.New("still being written"), false)
	}
}

// settle checks a candidate whose size has been stable long enough.
func (w *Watcher) settle(p string, c *candidate, existing bool) {
	if memusage.IsName(filepath.Base(p)) {
		w.settleMemUsage(p, c, existing)
		return
	}
	if c.size > w.opts.MaxBytes {
		if !c.tooBig {
			c.tooBig = true
			w.emit(Event{Kind: EventError, Path: p, Size: c.size, Err: fmt.Errorf("%s: %s, over the %s limit for a snapshot here (watch --max-size); not opened",
				p, bytesize.Torch(c.size), bytesize.Torch(w.opts.MaxBytes))})
		}
		return
	}
	if c.failed || time.Since(c.since) < w.opts.Settle {
		if c.failed && !c.reported && time.Since(c.since) >= w.opts.GiveUp {
			c.reported = true
			w.emit(Event{Kind: EventError, Path: p, Size: c.size, Err: c.lastErr(p, w.opts.Check)})
		}
		return
	}
	if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		c.failed = true
		if errors.Is(err, os.ErrPermission) && !c.reported {
			c.reported = true
			w.emit(Event{Kind: EventError, Path: p, Size: c.size, Err: err})
		}
		return
	} else {
		f.Close()
	}
	if err := w.opts.Check(p); err != nil {
		c.failed = true
		if existing && !c.reported && time.Since(c.mod) >= w.opts.GiveUp {
			// found at start, untouched for longer than GiveUp: nobody is
			// writing it, so it is reported now (the picker lists it with
			// its error); a fresh one waits as a new file would
			c.reported = true
			w.emit(Event{Kind: EventError, Path: p, Size: c.size, Err: c.lastErr(p, w.opts.Check), Existing: true})
		} else {
			// a fresh one is listed as being written meanwhile
			w.writing(p, c, err, existing)
		}
		return
	}
	delete(w.pending, p)
	w.reported[p] = true
	w.emit(Event{Kind: EventSnapshot, Path: p, Size: c.size, Existing: existing})
}

// settleMemUsage is settle for a memUsageInfo CSV: reported once stable
// and parsed; one that still does not parse GiveUp after its last change
// is an EventError with the parser's line.
func (w *Watcher) settleMemUsage(p string, c *candidate, existing bool) {
	if c.failed || time.Since(c.since) < w.opts.Settle {
		if c.failed && !c.reported && time.Since(c.since) >= w.opts.GiveUp {
			if err := checkMemUsage(p); err != nil {
				c.reported = true
				w.emit(Event{Kind: EventError, Path: p, Size: c.size, Err: err})
			} else {
				c.failed = false // parses now: reported on the next tick
			}
		}
		return
	}
	if err := checkMemUsage(p); err != nil {
		c.failed = true
		if existing && time.Since(c.mod) >= w.opts.GiveUp {
			// there before the watch and untouched: nobody is writing it
			c.reported = true
			w.emit(Event{Kind: EventError, Path: p, Size: c.size, Err: err, Existing: true})
		}
		return
	}
	delete(w.pending, p)
	w.reported[p] = true
	w.emit(Event{Kind: EventMemUsage, Path: p, Size: c.size, Existing: existing})
}

// writing reports a candidate not complete yet, once per version.
func (w *Watcher) writing(p string, c *candidate, why error, existing bool) {
	if c.writing && !existing {
		return
	}
	c.writing = true
	w.emit(Event{Kind: EventWriting, Path: p, Size: c.size, Err: why, Existing: existing})
}

func (c *candidate) lastErr(p string, check func(string) error) error {
	if err := check(p); err != nil {
		return fmt.Errorf("not a complete snapshot after %d stable bytes: %w", c.size, err)
	}
	return errors.New("not a complete snapshot")
}

// dirAppeared handles a new directory in the root or inside a profiler dir.
func (w *Watcher) dirAppeared(p string, existing bool) {
	parent := filepath.Dir(p)
	name := filepath.Base(p)
	switch {
	case parent == w.dir:
		if !strings.HasSuffix(name, profiler.DirNameSuffix) && !hasChild(p, profiler.FrameworkDir) {
			return
		}
		if w.profDirs[p] {
			return
		}
		w.profDirs[p] = true
		w.fs.Add(p)
		w.emit(Event{Kind: EventProfilerDir, Path: p, Dir: p, Existing: existing})
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			switch {
			case e.IsDir():
				w.dirAppeared(filepath.Join(p, e.Name()), existing)
			case !existing && profiler.IsProfilerInfo(e.Name()):
				// written before the directory was watched
				w.emit(Event{Kind: EventRunComplete, Path: filepath.Join(p, e.Name()), Dir: p})
			}
		}
	case w.profDirs[parent] && (name == profiler.FrameworkDir || name == profiler.OutputDir):
		w.fs.Add(p)
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if !e.IsDir() {
				w.fileInProfiler(filepath.Join(p, e.Name()), existing)
			}
		}
	}
}

func hasChild(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// fileInProfiler handles a file created or written inside FRAMEWORK or
// ASCEND_PROFILER_OUTPUT.
func (w *Watcher) fileInProfiler(p string, existing bool) {
	sub := filepath.Dir(p)
	prof := filepath.Dir(sub)
	switch filepath.Base(sub) {
	case profiler.OutputDir:
		if filepath.Base(p) == profiler.AnalyseDone && !w.analysed[prof] {
			w.analysed[prof] = true
			w.emit(Event{Kind: EventAnalyseDone, Path: p, Dir: prof, Existing: existing})
		}
	case profiler.FrameworkDir:
		if profiler.KindOf(filepath.Base(p)) == profiler.KindUnknown {
			return
		}
		if _, ok := w.fwSize[p]; !ok {
			w.fwSize[p] = 0
		}
		w.fwDirty[p] = true
	}
}

func (w *Watcher) handle(ev fsnotify.Event) {
	p := filepath.Clean(ev.Name)
	parent := filepath.Dir(p)
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		w.removed(p)
		return
	}
	if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Write) && !ev.Has(fsnotify.Chmod) {
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return // already gone
	}
	switch {
	case fi.IsDir():
		if ev.Has(fsnotify.Create) {
			w.dirAppeared(p, false)
		}
	case parent == w.dir:
		if isWatchedName(filepath.Base(p)) {
			if w.reported[p] && ev.Has(fsnotify.Chmod) && !ev.Has(fsnotify.Write) {
				return
			}
			if w.reported[p] { // rewritten: report again once complete
				delete(w.reported, p)
			}
			w.candidate(p, false)
		}
	case w.profDirs[parent]:
		if profiler.IsProfilerInfo(filepath.Base(p)) && (ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write)) {
			w.emit(Event{Kind: EventRunComplete, Path: p, Dir: parent})
		}
	default:
		if w.profDirs[filepath.Dir(parent)] {
			w.fileInProfiler(p, false)
		}
	}
}

func (w *Watcher) removed(p string) {
	switch {
	case p == w.dir:
		if !w.rootGone {
			w.rootGone = true
			w.emit(Event{Kind: EventError, Path: p, Err: fmt.Errorf("%s: directory vanished; waiting for it to come back", p)})
		}
	case w.reported[p]:
		delete(w.reported, p)
		w.emit(Event{Kind: EventRemoved, Path: p})
	case w.pending[p] != nil:
		if w.pending[p].writing {
			w.emit(Event{Kind: EventRemoved, Path: p})
		}
		delete(w.pending, p)
	case w.profDirs[p]:
		delete(w.profDirs, p)
		delete(w.analysed, p)
		for f := range w.fwSize {
			if strings.HasPrefix(f, p+string(filepath.Separator)) {
				delete(w.fwSize, f)
				delete(w.fwDirty, f)
			}
		}
		w.emit(Event{Kind: EventRemoved, Path: p, Dir: p})
	default:
		if _, ok := w.fwSize[p]; ok {
			delete(w.fwSize, p)
			delete(w.fwDirty, p)
			w.emit(Event{Kind: EventRemoved, Path: p, Dir: filepath.Dir(filepath.Dir(p))})
		}
	}
}

func (w *Watcher) tick() {
	if w.rootGone {
		if fi, err := os.Stat(w.dir); err == nil && fi.IsDir() {
			if err := w.fs.Add(w.dir); err == nil {
				w.rootGone = false
				w.scanRoot(false)
			}
		}
		return
	}
	var ready []string
	for p, c := range w.pending {
		if c.tooBig || c.failed && c.reported {
			// given up on until it changes: its fsnotify events (or a
			// rescan) bring it back, so thousands of such files cost no
			// stat per tick
			continue
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			delete(w.pending, p)
			continue
		}
		if fi.Size() != c.size || !fi.ModTime().Equal(c.mod) {
			c.size, c.mod, c.since, c.failed, c.reported, c.tooBig = fi.Size(), fi.ModTime(), time.Now(), false, false, false
			continue
		}
		ready = append(ready, p)
	}
	// oldest first, so that of files settling in one tick the newest is the
	// last event (the one a follow opens), not the map's pick; mtimes are
	// coarse (a kernel tick), so ties go by when their last change was seen
	slices.SortFunc(ready, func(a, b string) int {
		ca, cb := w.pending[a], w.pending[b]
		if c := ca.mod.Compare(cb.mod); c != 0 {
			return c
		}
		if c := ca.since.Compare(cb.since); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, p := range ready {
		w.settle(p, w.pending[p], false)
	}
	for p := range w.fwDirty {
		delete(w.fwDirty, p)
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if fi.Size() > w.fwSize[p] {
			w.fwSize[p] = fi.Size()
			w.emit(Event{Kind: EventFrameworkGrow, Path: p, Dir: filepath.Dir(filepath.Dir(p)), Size: fi.Size()})
		}
	}
}
