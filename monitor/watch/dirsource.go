package watch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/memusage"
)

// DirOptions configures a DirSource.
type DirOptions struct {
	// Follow opens each new snapshot as it lands. Without it the newest
	// one there at start is opened and stays.
	Follow bool
	// Pick opens this capture instead — its 1-based index in arrival
	// order, or its file name — and stays on it (Follow is then off).
	Pick string
	// MaxBytes: snapshot files larger than this are listed with an error
	// and not opened (default DefaultMaxBytes).
	MaxBytes int64
	// MaxMemory caps the memory decoding one snapshot may take (default
	// DefaultMaxMemory); a file that would need more is not opened.
	MaxMemory int64
}

// DefaultMaxMemory is the decoding budget of one snapshot in a watch.
const DefaultMaxMemory = 4 << 30

// DirSource feeds a Store from a watched directory: the open capture's
// memory data, and the ops of every profiler directory, tailed while they
// grow. It keeps the captures in arrival order for a picker.
type DirSource struct {
	dir    string
	store  *store.Store
	follow bool   // open each new snapshot as it lands (Open changes it)
	auto   bool   // Follow as asked
	pick   string // DirOptions.Pick
	limits replay.Options
	openMu sync.Mutex // one capture is opened at a time (watch loop or Open)

	w      *Watcher
	tail   *ProfilerTail
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	ready     chan struct{} // closed once the scan is over and its capture is open (Ready)
	readyOnce sync.Once

	mu       sync.Mutex
	captures []capture.Entry // in the order seen
	byPath   map[string]int  // index into captures
	sorted   []capture.Entry // captures numbered (Number); nil when stale
	held     bool            // the user works in the open capture: new ones do not replace it
	newWhile int             // snapshots that landed while held
	open     string          // the capture shown
	times    string          // the open capture's time recovery (TimesNote)
	untimed  bool            // the open capture is a snapshot without times of its own
	aligned  []string        // the complete runs its alignment read
	realign  bool            // a run of its process completed since it was aligned
	ops      int
	errs     []string
	memVer   int // bumped when a memUsageInfo CSV lands, changes or goes
	mem      memCache
}

// memCache is MemUsage's answer for one open capture, CSV set and device count.
type memCache struct {
	open      string
	ver, ndev int
	files     []*memusage.File
	computed  bool
}

// NewDirSource returns a source for dir feeding store; Start starts it.
func NewDirSource(dir string, st *store.Store, o DirOptions) *DirSource {
	follow := o.Follow && o.Pick == ""
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxMemory <= 0 {
		o.MaxMemory = DefaultMaxMemory
	}
	return &DirSource{dir: dir, store: st, follow: follow, auto: follow, pick: o.Pick, byPath: map[string]int{}, ready: make(chan struct{}),
		limits: replay.Options{MaxFileSize: o.MaxBytes, MaxMemory: o.MaxMemory}}
}

// ScanDir calls fn with each capture already in dir, oldest first, and
// returns once the scan is over (or fn fails).
func ScanDir(dir string, fn func(capture.Entry) error) error {
	w, err := Watch(dir, Options{Settle: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	defer w.Close()
	// The initial scan reports what exists, then says it is over; the
	// captures are listed in arrival order once it is.
	var found []capture.Entry
	at := map[string]int{}
	emit := func() error {
		for _, c := range Number(found) {
			if err := fn(c); err != nil {
				return err
			}
		}
		return nil
	}
	for ev := range w.Events {
		if ev.Kind == EventScanDone {
			return emit()
		}
		if c, ok := captureOf(ev); ok {
			if i, seen := at[c.Path]; seen {
				found[i] = c // being written, then complete
				continue
			}
			at[c.Path] = len(found)
			found = append(found, c)
		}
	}
	return emit()
}

func captureOf(ev Event) (capture.Entry, bool) {
	var c capture.Entry
	switch ev.Kind {
	case EventSnapshot:
		c = capture.Entry{Kind: capture.Snapshot, Path: ev.Path, Existing: ev.Existing, Size: ev.Size}
	case EventProfilerDir:
		c = capture.Entry{Kind: capture.Profiler, Path: ev.Path, Existing: ev.Existing, Size: treeSize(ev.Path)}
	case EventWriting:
		why := "still being written"
		if ev.Err != nil && ev.Err.Error() != why {
			// found by the scan: fresh, and not complete (yet)
			why = "not complete yet: " + oneLine(strings.ReplaceAll(ev.Err.Error(), ev.Path+": ", ""))
		}
		c = capture.Entry{Kind: capture.Snapshot, Path: ev.Path, Existing: ev.Existing, Size: ev.Size, Writing: true, Error: why}
	case EventError:
		// a file that never became a readable snapshot (truncated by a
		// crashed job, garbage) is listed with its one-line error
		st, err := os.Stat(ev.Path)
		if err != nil || !st.Mode().IsRegular() || ev.Err == nil || memusage.IsName(filepath.Base(ev.Path)) {
			return capture.Entry{}, false // a memUsageInfo CSV is no capture: its error is a note
		}
		c = capture.Entry{Kind: capture.Snapshot, Path: ev.Path, Existing: ev.Existing, Error: oneLine(ev.Err.Error())}
	default:
		return capture.Entry{}, false
	}
	c.Arrived = time.Now()
	if st, err := os.Stat(ev.Path); err == nil {
		c.Arrived = st.ModTime()
		if c.Kind == capture.Snapshot {
			c.Size = st.Size()
		}
	}
	return c, true
}

// oneLine keeps the first line of an error message.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Number is the one numbering of a directory's captures, the one `watch
// --list` prints, `--open N` takes and the capture picker (key c) shows:
// it orders cs by arrival — modification time, equal times by path — and
// numbers them from 1, leaving out (Index 0, at the end) those removed. A
// directory listed by a fresh scan and by a watch that saw it fill number
// their captures alike. It sorts cs in place and returns it.
func Number(cs []capture.Entry) []capture.Entry {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Removed != cs[j].Removed {
			return cs[j].Removed
		}
		return arrivedBefore(&cs[i], &cs[j])
	})
	n := 0
	for i := range cs {
		cs[i].Index = 0
		if !cs[i].Removed {
			n++
			cs[i].Index = n
		}
	}
	return cs
}

// arrivedBefore orders two captures by arrival time, then by path.
func arrivedBefore(a, b *capture.Entry) bool {
	if !a.Arrived.Equal(b.Arrived) {
		return a.Arrived.Before(b.Arrived)
	}
	return a.Path < b.Path
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

// Start watches the directory until ctx ends or Stop is called.
func (d *DirSource) Start(ctx context.Context) error {
	w, err := Watch(d.dir, Options{MaxBytes: d.limits.MaxFileSize})
	if err != nil {
		return err
	}
	tail, err := NewProfilerTail(d.dir, d.store)
	if err != nil {
		w.Close()
		return err
	}
	d.w, d.tail = w, tail
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go func() { defer crash.Recover(); d.loop(ctx) }()
	return nil
}

// Stop ends the watch and waits for it; the Store keeps what it has.
// It may be called more than once.
func (d *DirSource) Stop() {
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
// scan is over, later ones as they land (with follow). Snapshots that land
// while others wait in the queue are not opened one by one: only the
// newest, once the queue is drained.
func (d *DirSource) loop(ctx context.Context) {
	defer close(d.done)
	defer d.readyOnce.Do(func() { close(d.ready) }) // a watch that ends early is as ready as it gets
	var newestExisting, toOpen string
	var newestTime time.Time
	scanned := false // the scan is over; ready once toOpen is opened
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	d.pollTail()
	for {
		if toOpen != "" && len(d.w.Events) == 0 {
			d.openSnapshot(toOpen)
			toOpen = ""
		}
		if scanned && toOpen == "" {
			d.readyOnce.Do(func() { close(d.ready) })
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			d.pollTail()
			d.realignOpen()
		case ev, ok := <-d.w.Events:
			if !ok {
				return
			}
			var c capture.Entry
			if cc, ok := captureOf(ev); ok {
				c = d.addCapture(cc)
			}
			switch ev.Kind {
			case EventScanDone:
				if d.pick != "" && d.Current() == "" {
					// indexes of existing captures are final once the scan is over
					for _, c := range d.List() {
						if c.Kind == capture.Snapshot && c.Error == "" && (strconv.Itoa(c.Index) == d.pick || filepath.Base(c.Path) == filepath.Base(d.pick)) {
							d.openSnapshot(c.Path)
							break
						}
					}
				}
				switch {
				case d.pick != "" && d.Current() == "":
					d.note(fmt.Sprintf("--open %s: no such snapshot in %s (yet)", d.pick, d.dir))
				case d.pick == "" && newestExisting != "" && d.Current() == "" && toOpen == "":
					toOpen = newestExisting
				}
				scanned = true
			case EventSnapshot:
				switch {
				case d.pick != "":
					if !ev.Existing && d.Current() == "" && (filepath.Base(c.Path) == filepath.Base(d.pick) || strconv.Itoa(d.indexOf(c.Path)) == d.pick) {
						d.openSnapshot(ev.Path)
					}
				case ev.Existing:
					// the newest by modification time, whatever the scan order
					if newestExisting == "" || arrivedBefore(&capture.Entry{Path: newestExisting, Arrived: newestTime}, &c) {
						newestExisting, newestTime = ev.Path, c.Arrived
					}
				case d.Current() == "" && toOpen == "":
					toOpen = ev.Path
				case d.Following():
					if !d.holding() {
						toOpen = ev.Path
					}
				}
			case EventProfilerDir, EventFrameworkGrow, EventAnalyseDone, EventRunComplete:
				d.pollTail()
				if ev.Kind != EventProfilerDir {
					d.update(ev.Dir, func(c *capture.Entry) { c.Size = treeSize(c.Path) })
				}
				if ev.Kind == EventAnalyseDone || ev.Kind == EventRunComplete {
					d.runCompleted(ev.Dir)
				}
			case EventMemUsage:
				d.mu.Lock()
				d.memVer++
				d.mu.Unlock()
			case EventRemoved:
				if memusage.IsName(filepath.Base(ev.Path)) {
					d.mu.Lock()
					d.memVer++
					d.mu.Unlock()
				}
				d.update(ev.Path, func(c *capture.Entry) { c.Error, c.Removed, c.Writing = "removed", true, false })
				if toOpen == ev.Path {
					toOpen = ""
				}
			case EventError:
				if msg := fmt.Sprint(ev.Err); strings.HasPrefix(msg, ev.Path+":") {
					d.note(msg) // it names the file already (a memUsageInfo CSV's line)
				} else {
					d.note(fmt.Sprintf("%s: %v", ev.Path, ev.Err))
				}
			}
		}
	}
}

// MemUsage returns the memUsageInfo CSVs paired with the open capture
// (replay/memusage: its directory, each of the Store's devices, the
// nearest stamp), nil before a snapshot is open. It reads the directory
// again only when a CSV landed, changed or went, or another capture was
// opened; a CSV that does not parse is a note.
func (d *DirSource) MemUsage() []*memusage.File {
	devs := d.store.Devices()
	d.mu.Lock()
	open, ver := d.open, d.memVer
	if c := d.mem; c.computed && c.open == open && c.ver == ver && c.ndev == len(devs) {
		d.mu.Unlock()
		return c.files
	}
	d.mu.Unlock()
	var files []*memusage.File
	if open != "" && !isProfilerPath(open) {
		var errs []error
		files, errs = memusage.ReadBeside(open, devs)
		for _, err := range errs {
			d.note(oneLine(err.Error()))
		}
	}
	d.mu.Lock()
	d.mem = memCache{open: open, ver: ver, ndev: len(devs), files: files, computed: true}
	d.mu.Unlock()
	return files
}

// isProfilerPath: a profiler directory is open, not a snapshot.
func isProfilerPath(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// Ready is closed once the directory's initial scan is over and the capture
// it chose (the newest, or --open's) has been opened or has failed to open,
// so a headless run's time counts from there, not from the first read.
func (d *DirSource) Ready() <-chan struct{} { return d.ready }

// Current is the path of the capture shown, "" before one is opened.
func (d *DirSource) Current() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.open
}

// addCapture records a capture, or what changed of one seen before (a
// snapshot complete after being written, or rewritten in place: its new
// size and time), and returns it (indexOf numbers it).
func (d *DirSource) addCapture(c capture.Entry) capture.Entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i, ok := d.byPath[c.Path]; ok {
		e := &d.captures[i]
		e.Size, e.Error, e.Writing, e.Removed, e.Arrived = c.Size, c.Error, c.Writing, false, c.Arrived
	} else {
		d.byPath[c.Path] = len(d.captures)
		d.captures = append(d.captures, c)
	}
	d.sorted = nil
	return c
}

// indexOf is the number of the capture at path (0: none).
func (d *DirSource) indexOf(path string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.numbered() {
		if e.Path == path {
			return e.Index
		}
	}
	return 0
}

// update changes the capture at path, if there is one.
func (d *DirSource) update(path string, fn func(*capture.Entry)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if i, ok := d.byPath[path]; ok {
		fn(&d.captures[i])
		d.sorted = nil
	}
}

// openSnapshot decodes path and makes it the Store's memory data; the ops
// gathered from profiler directories stay.
func (d *DirSource) openSnapshot(path string) {
	if err := d.openCapture(path); err != nil {
		d.note(err.Error())
	}
}

// openCapture makes a snapshot, or the memory records of a profiler
// directory, the Store's memory data. Ops are not re-read: the profiler
// tail has them all already.
func (d *DirSource) openCapture(path string) error {
	d.openMu.Lock()
	defer d.openMu.Unlock()
	d.mu.Lock()
	d.realign = false // the runs complete now are read below; one completing meanwhile sets it again
	d.mu.Unlock()
	var times string
	var aligned []string
	untimed := false
	// A snapshot without times (torch_npu) gets them from the complete
	// profiler runs of its process in the directory (docs/timerecovery.md);
	// a run that cannot be used does not keep the snapshot from opening.
	// One that completes later aligns it again (runCompleted).
	prepare := func(c *replay.Capture) error {
		untimed = !c.Snapshot.HasTimestamps()
		var warn strings.Builder
		res, runs, err := RecoverTimes(c, RecoverOptions{CompleteOnly: true}, &warn)
		for _, r := range runs {
			aligned = append(aligned, filepath.Clean(r.Path))
		}
		if err != nil {
			warn.WriteString(err.Error())
		}
		times = strings.TrimSpace(RecoveredNote(res, -1) + " " + strings.TrimSpace(warn.String()))
		return nil
	}
	if _, err := Load(context.Background(), path, d.store, LoadOptions{Limits: d.limits, MemoryOnly: true, Prepare: prepare}); err != nil {
		d.update(path, func(c *capture.Entry) { c.Error = err.Error() })
		return err
	}
	d.mu.Lock()
	d.open, d.times, d.untimed, d.aligned = path, times, untimed, aligned
	d.mu.Unlock()
	d.update(path, func(c *capture.Entry) { c.Error = "" })
	return nil
}

// runCompleted notes that profiler run dir finalised its FRAMEWORK data or
// was analysed: when it is a run of the open snapshot's process that its
// alignment did not read complete, and the snapshot has no times of its
// own, the snapshot is aligned again at the next poll (realignOpen), so
// its time axis appears without opening it again. The events of one run's
// files come together; one alignment takes them all.
func (d *DirSource) runCompleted(dir string) {
	dir = filepath.Clean(dir)
	d.mu.Lock()
	open, untimed, read := d.open, d.untimed, slices.Contains(d.aligned, dir)
	d.mu.Unlock()
	if open == "" || !untimed || read || !slices.Contains(classify.Beside(open), dir) {
		return
	}
	d.mu.Lock()
	if d.open == open {
		d.realign = true
	}
	d.mu.Unlock()
}

// realignOpen opens the open snapshot again when a run of its process
// completed since it was aligned (runCompleted), unless the user holds it
// (SetHold): then once the hold ends.
func (d *DirSource) realignOpen() {
	d.mu.Lock()
	open, want := d.open, d.realign && !d.held
	d.mu.Unlock()
	if !want {
		return
	}
	if err := d.openCapture(open); err != nil {
		d.note(err.Error()) // not again until another run completes
	}
}

// List returns the captures numbered and ordered by Number (arrival
// order, oldest first, removed ones last), with the one shown marked Open.
// A profiler directory's time is looked at again (a file created in it
// changes it), so the list numbers its captures as `watch --list` would now.
func (d *DirSource) List() []capture.Entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.captures {
		if c := &d.captures[i]; c.Kind == capture.Profiler && !c.Removed {
			if st, err := os.Stat(c.Path); err == nil && !st.ModTime().Equal(c.Arrived) {
				c.Arrived, d.sorted = st.ModTime(), nil
			}
		}
	}
	out := d.numbered()
	for i := range out {
		out[i].Open = out[i].Path == d.open
	}
	return out
}

// numbered is a numbered copy of the captures (d.mu held), sorted again
// only after a change.
func (d *DirSource) numbered() []capture.Entry {
	if d.sorted == nil {
		d.sorted = Number(append([]capture.Entry(nil), d.captures...))
	}
	return append([]capture.Entry(nil), d.sorted...)
}

// Open makes the capture at path the one shown. Opening the newest
// snapshot keeps following new ones (with DirOptions.Follow); any other
// choice stays put until the next one.
func (d *DirSource) Open(path string) error {
	d.mu.Lock()
	var kind capture.Kind
	newest := ""
	for _, c := range d.numbered() {
		if c.Path == path {
			kind = c.Kind
		}
		if c.Kind == capture.Snapshot && !c.Removed {
			newest = c.Path
		}
	}
	d.mu.Unlock()
	if kind == "" {
		return fmt.Errorf("%s: not a capture of %s", path, d.dir)
	}
	if err := d.openCapture(path); err != nil {
		return err
	}
	d.mu.Lock()
	d.follow = d.auto && path == newest
	d.mu.Unlock()
	return nil
}

// pollTail appends the ops the profiler tail found since the last poll.
func (d *DirSource) pollTail() {
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

func (d *DirSource) note(msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) < 100 {
		d.errs = append(d.errs, msg)
	}
}

// SetHold holds the open capture while the user works in it (paused, a
// block selected, the what-if view open): snapshots that land meanwhile
// are listed and counted (NewCaptures) but not opened. Releasing the hold
// does not open anything; FollowNewest does.
func (d *DirSource) SetHold(on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held = on
}

// holding reports whether a following source holds its capture now; a
// snapshot landing meanwhile is counted.
func (d *DirSource) holding() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held {
		d.newWhile++
	}
	return d.held
}

// NewCaptures is the number of snapshots that landed while the open one
// was held.
func (d *DirSource) NewCaptures() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.newWhile
}

// FollowNewest opens the newest readable snapshot (when it is not open
// already) and follows new ones again; the held count starts over.
func (d *DirSource) FollowNewest() error {
	d.mu.Lock()
	newest := ""
	for _, c := range d.numbered() {
		if c.Kind == capture.Snapshot && c.Error == "" && !c.Removed {
			newest = c.Path
		}
	}
	d.held, d.newWhile = false, 0
	d.follow = true
	open := d.open
	d.mu.Unlock()
	if newest == "" || newest == open {
		return nil
	}
	return d.openCapture(newest)
}

// Following reports whether new snapshots are opened as they land.
func (d *DirSource) Following() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.follow
}

// TimesNote is the header's line on the open snapshot's recovered times
// ("times recovered 97 %", and the runs refused); "" when its trace has
// times of its own or no profiler run of its process was complete.
func (d *DirSource) TimesNote() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.times
}

// Ops is the number of ops read from profiler directories so far.
func (d *DirSource) Ops() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ops
}

// Errors are the problems met so far (at most 100): captures that did not
// open, unreadable profiler files, watch errors; nil if none.
func (d *DirSource) Errors() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.errs...)
}
