package profiler

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/internal/oprange"
)

// Config configures a Recorder.
type Config struct {
	// Dir is the parent of the *_ascend_pt directories (tensorboard_trace_handler's dir_name).
	Dir string
	// Worker names the directories; default hostname (torch_npu appends _pid itself).
	Worker string
	// Schedule drives warmup/record cycles; nil records from Start to Stop without step markers.
	Schedule *Schedule
	// OnTraceReady runs per finished cycle with its directory; default Analyse.
	// Set NoAnalyse to leave the raw directory only.
	OnTraceReady func(dir string) error
	NoAnalyse    bool

	RecordShapes, ProfileMemory, WithStack, WithModules bool

	// RingSize bounds each record queue (op ranges, marks, memory); records
	// arriving while it is full are dropped and counted. Default 1<<15.
	RingSize int
	// FlushEvery also drains queues that hold fewer than 257 records once their
	// oldest is this old (0: torch_npu behaviour, drain only past 256 or at stop).
	FlushEvery time.Duration
	// Clock is the time source; default SystemClock.
	Clock Clock
	// PID and TID stamp step markers; defaults os.Getpid().
	PID, TID uint64
}

// Recorder records op ranges, marks, step markers and memory events into
// torch_npu FRAMEWORK files, one *_ascend_pt directory per schedule cycle.
// Record methods never block on I/O: they append to a bounded ring that a
// background dumper drains, and drop (counting) when it is full.
type Recorder struct {
	cfg   Config
	clock Clock
	tb    TimeBase // raw ↔ epoch for this recorder (monotonic ns, fixed pairing)

	cur     atomic.Pointer[dumper] // non-nil while RECORDing
	dropped atomic.Uint64

	mu          sync.Mutex // serialises Start/Step/Stop
	started     bool
	action      ProfilerAction
	stepNum     int
	stepStart   int64 // raw start of the open ProfilerStep range
	stepOpen    bool
	stepWasRec  bool
	dir         string // current cycle directory
	dump        *dumper
	startRaw    int64
	dirs        []string
	warnings    []string
	lastStampMS int64
	// dropped count when the current cycle started recording
	droppedAtStart uint64
}

// New returns a Recorder; nothing is written until Start.
func New(cfg Config) (*Recorder, error) {
	if cfg.Dir == "" {
		return nil, errors.New("profiler: Config.Dir is empty")
	}
	if cfg.Worker == "" {
		h, err := os.Hostname()
		if err != nil {
			h = "localhost"
		}
		cfg.Worker = h + "_" + strconv.Itoa(os.Getpid())
	}
	if len(cfg.Worker) >= 226 {
		return nil, fmt.Errorf("profiler: worker name longer than 225 characters")
	}
	if cfg.RingSize <= 0 {
		cfg.RingSize = 1 << 15
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock
	}
	if cfg.PID == 0 {
		cfg.PID = uint64(os.Getpid())
	}
	if cfg.TID == 0 {
		cfg.TID = cfg.PID
	}
	r := &Recorder{cfg: cfg, clock: cfg.Clock}
	raw, epoch := cfg.Clock.Raw(), cfg.Clock.Epoch()
	r.tb = TimeBase{DiffNS: epoch - raw, FreqMHz: 100, Source: "recorder clock"}
	return r, nil
}

// Now returns the raw clock value record times are given in.
func (r *Recorder) Now() int64 { return r.clock.Raw() }

// RawFromEpochUS places an epoch-µs time (allocator trace entries) on the raw clock.
func (r *Recorder) RawFromEpochUS(us int64) int64 { return r.tb.RawFromEpochNS(us * 1000) }

// TimeBase returns the raw → epoch conversion the recorder writes into profiler_info.json.
func (r *Recorder) TimeBase() TimeBase { return r.tb }

// Recording reports whether records are being kept now.
func (r *Recorder) Recording() bool { return r.cur.Load() != nil }

// RecordOp records a finished op range (times from Now). No-op unless recording.
func (r *Recorder) RecordOp(op *OpRangeRecord) {
	if d := r.cur.Load(); d != nil && !d.ops.push(op) {
		r.dropped.Add(1)
	}
}

// Op records a plain op range on the recorder's thread id.
func (r *Recorder) Op(name string, startNS, endNS int64, seq int64) {
	if d := r.cur.Load(); d != nil {
		op := OpRangeRecord{StartNS: startNS, EndNS: endNS, Seq: seq, PID: r.cfg.PID,
			StartTID: r.cfg.TID, EndTID: r.cfg.TID, Name: name}
		if !d.ops.push(&op) {
			r.dropped.Add(1)
		}
	}
}

// RecordMark records a task-queue mark.
func (r *Recorder) RecordMark(m *OpMarkRecord) {
	if d := r.cur.Load(); d != nil && !d.marks.push(m) {
		r.dropped.Add(1)
	}
}

// RecordMemory records a memory event (TimeNS on the raw clock). Only kept
// when the recorder was configured with ProfileMemory.
func (r *Recorder) RecordMemory(m *MemoryUsageRecord) {
	if !r.cfg.ProfileMemory {
		return
	}
	if d := r.cur.Load(); d != nil && !d.mem.push(m) {
		r.dropped.Add(1)
	}
}

// MemoryRecordFromTrace maps an allocator trace entry and the allocator's
// totals after it to a torch.memory_usage record (MemoryUsageFromTrace,
// profiler/tracemap.go), timed on the recorder's raw clock. Actions
// without a memory_usage record (segment events, snapshots, OOM) give
// false.
func (r *Recorder) MemoryRecordFromTrace(device int, e *snapshot.TraceEntry, allocated, reserved, active int64) (MemoryUsageRecord, bool) {
	if _, _, ok := MemoryKindOf(e.Action, e.Size); !ok {
		return MemoryUsageRecord{}, false
	}
	t := r.Now()
	if e.TimeUS != 0 {
		t = r.RawFromEpochUS(e.TimeUS)
	}
	return MemoryUsageFromTrace(device, e, Totals{Allocated: allocated, Reserved: reserved, Active: active}, t, r.cfg.TID, r.cfg.PID)
}

// Dropped is the number of records dropped because a queue was full.
func (r *Recorder) Dropped() uint64 { return r.dropped.Load() }

// Dirs lists the cycle directories created so far (deleted warmup-only ones excluded).
func (r *Recorder) Dirs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.dirs...)
}

// Warnings returns the controller's warnings (e.g. a cycle cut short).
func (r *Recorder) Warnings() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.warnings...)
}

// StepNum is the current step number.
func (r *Recorder) StepNum() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stepNum
}

// Start applies the first transition (NONE → schedule(0)) and opens ProfilerStep#0.
func (r *Recorder) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return errors.New("profiler: already started")
	}
	r.started = true
	cur := ActionRecord
	if r.cfg.Schedule != nil {
		cur = r.cfg.Schedule.Action(r.stepNum)
	}
	err := r.transit(ActionNone, cur)
	r.openStep()
	return err
}

// Step closes ProfilerStep#n, moves to step n+1 (running the transition the
// schedule asks for) and opens ProfilerStep#n+1. Without a schedule it only
// counts steps.
func (r *Recorder) Step() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return errors.New("profiler: Step before Start")
	}
	r.closeStep()
	prev := r.action
	r.stepNum++
	var err error
	if r.cfg.Schedule != nil {
		err = r.transit(prev, r.cfg.Schedule.Action(r.stepNum))
	}
	r.openStep()
	return err
}

// Stop closes the open step and applies the (current → stopped) transition.
func (r *Recorder) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		return nil
	}
	r.closeStep()
	r.started = false
	return r.transit(r.action, actionStopped)
}

func (r *Recorder) openStep() {
	if r.cfg.Schedule == nil {
		return
	}
	r.stepOpen = true
	r.stepWasRec = r.cur.Load() != nil
	r.stepStart = r.clock.Raw()
}

func (r *Recorder) closeStep() {
	if !r.stepOpen {
		return
	}
	r.stepOpen = false
	d := r.cur.Load()
	if d == nil || !r.stepWasRec {
		return
	}
	op := OpRangeRecord{StartNS: r.stepStart, EndNS: r.clock.Raw(), Seq: -1, PID: r.cfg.PID,
		StartTID: r.cfg.TID, EndTID: r.cfg.TID, Scope: ScopeUserScope,
		Name: oprange.StepName(int64(r.stepNum))}
	if !d.ops.push(&op) {
		r.dropped.Add(1)
	}
}

// transit runs the controller steps for prev → cur
// (docs/reference/profiler-format.md §8.2).
func (r *Recorder) transit(prev, cur ProfilerAction) error {
	var errs []error
	for _, c := range transition(prev, cur) {
		if err := r.do(c, prev, cur); err != nil {
			errs = append(errs, err)
		}
	}
	if cur != actionStopped {
		r.action = cur
	}
	return errors.Join(errs...)
}

func (r *Recorder) do(c ctl, prev, cur ProfilerAction) error {
	switch c {
	case ctlWarn:
		if r.cfg.Schedule == nil {
			return nil // stopping an unscheduled recording is the normal end
		}
		r.warnings = append(r.warnings, fmt.Sprintf("step %d: profiler action %s → %s ends an incomplete cycle", r.stepNum, prev, cur))
	case ctlInit:
		return r.initDir()
	case ctlWarmup:
		return r.ensureDumper()
	case ctlStart:
		if err := r.ensureDumper(); err != nil {
			return err
		}
		r.startRaw = r.clock.Raw()
		r.droppedAtStart = r.dropped.Load()
		r.cur.Store(r.dump)
	case ctlStop:
		r.cur.Store(nil)
		if r.dump != nil {
			err := r.dump.close()
			r.dump = nil
			if n := r.dropped.Load() - r.droppedAtStart; n > 0 {
				// torch_npu logs "RingBuffer full N times" at the same point
				r.warnings = append(r.warnings, fmt.Sprintf("%s: %d records dropped because a queue was full", r.dir, n))
			}
			return err
		}
	case ctlFinalize:
		if r.dump != nil { // warmup-only cycle: receivers stop without data
			r.dump.close()
			r.dump = nil
		}
		return r.writeInfo()
	case ctlTraceReady:
		if r.cfg.OnTraceReady != nil {
			return r.cfg.OnTraceReady(r.dir)
		}
		if !r.cfg.NoAnalyse {
			return Analyse(r.dir)
		}
	case ctlDeleteDir:
		if r.dir != "" {
			err := os.RemoveAll(r.dir)
			if n := len(r.dirs); n > 0 && r.dirs[n-1] == r.dir {
				r.dirs = r.dirs[:n-1]
			}
			r.dir = ""
			return err
		}
	}
	return nil
}

// initDir creates {worker}_{timestamp}_ascend_pt
// (docs/reference/profiler-format.md §1.1), mode 0750.
func (r *Recorder) initDir() error {
	if err := os.MkdirAll(r.cfg.Dir, 0o750); err != nil {
		return err
	}
	now := time.Unix(0, r.clock.Epoch())
	ms := now.UnixMilli()
	if ms <= r.lastStampMS { // keep cycle directories distinct within a millisecond
		ms = r.lastStampMS + 1
	}
	r.lastStampMS = ms
	t := time.UnixMilli(ms).Local()
	stamp := t.Format("20060102150405") + fmt.Sprintf("%03d", t.Nanosecond()/1e6)
	dir := filepath.Join(r.cfg.Dir, r.cfg.Worker+"_"+stamp+DirNameSuffix)
	if err := os.Mkdir(dir, 0o750); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		return err
	}
	r.dir = dir
	r.dirs = append(r.dirs, dir)
	return nil
}

func (r *Recorder) ensureDumper() error {
	if r.dump != nil {
		return nil
	}
	if r.dir == "" {
		if err := r.initDir(); err != nil {
			return err
		}
	}
	fw := filepath.Join(r.dir, FrameworkDir)
	if err := os.MkdirAll(fw, 0o750); err != nil {
		return err
	}
	if err := os.Chmod(fw, 0o750); err != nil {
		return err
	}
	r.dump = newDumper(fw, r.cfg.RingSize, r.cfg.FlushEvery)
	return nil
}

// writeInfo writes profiler_info.json and profiler_metadata.json
// (docs/reference/profiler-format.md §4).
func (r *Recorder) writeInfo() error {
	if r.dir == "" {
		return nil
	}
	acts := []string{"ProfilerActivity.CPU"}
	sched := map[string]int{"wait": 0, "active": 1, "warmup": 0, "repeat": 0, "skip_first": 0, "skip_first_wait": 0}
	if s := r.cfg.Schedule; s != nil {
		n := s.normalized()
		sched = map[string]int{"wait": n.Wait, "active": n.Active, "warmup": n.Warmup, "repeat": n.Repeat,
			"skip_first": n.SkipFirst, "skip_first_wait": n.SkipFirstWait}
	}
	endRaw := r.clock.Raw()
	info := map[string]any{
		"config": map[string]any{
			"common_config": map[string]any{
				"activities": acts, "schedule": sched, "record_shapes": r.cfg.RecordShapes,
				"profile_memory": r.cfg.ProfileMemory, "with_stack": r.cfg.WithStack,
				"with_flops": false, "with_modules": r.cfg.WithModules,
			},
			"experimental_config": map[string]any{
				"_profiler_level": "Level0", "_data_simplification": true, "_export_type": []string{"text"},
			},
		},
		"start_info": map[string]any{
			"syscnt_enable": false, "freq": 100.0, "start_cnt": r.startRaw, "start_monotonic": r.startRaw,
		},
		// One fixed raw↔epoch pairing for the whole run keeps conversions exact.
		"end_info": map[string]any{
			"collectionTimeEnd": endRaw + r.tb.DiffNS, "MonotonicTimeEnd": endRaw,
		},
		"torch_npu_version": "npumon", "cann_version": "",
	}
	if err := writeJSONFile(filepath.Join(r.dir, "profiler_info.json"), info); err != nil {
		return err
	}
	return writeJSONFile(filepath.Join(r.dir, "profiler_metadata.json"), map[string]any{"producer": "npumon"})
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o640); err != nil {
		return err
	}
	return os.Chmod(path, 0o640)
}

// ---- bounded queues and the background dumper ----

// ring is a bounded queue; push fails (never blocks) when it is full. The
// dumper swaps the whole buffer out in O(1) under the lock and encodes it
// outside, so producers only ever wait for another push.
type ring[T any] struct {
	mu     sync.Mutex
	buf    []T
	size   int
	closed bool
	oldest time.Time
}

func newRing[T any](size int) *ring[T] { return &ring[T]{buf: make([]T, 0, size), size: size} }

func (q *ring[T]) push(v *T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return true // after stop: outside the cycle, not a drop
	}
	if len(q.buf) >= q.size {
		q.mu.Unlock()
		return false
	}
	q.buf = append(q.buf, *v)
	q.mu.Unlock()
	return true
}

// ready reports whether the dumper should drain now.
func (q *ring[T]) ready(now time.Time, every time.Duration) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.buf)
	if n > 256 {
		return true
	}
	if n == 0 {
		q.oldest = time.Time{}
		return false
	}
	if every <= 0 {
		return false
	}
	if q.oldest.IsZero() {
		q.oldest = now
	}
	return now.Sub(q.oldest) >= every
}

// swap hands out the queued records and installs spare (emptied) as the new buffer.
func (q *ring[T]) swap(spare []T, close bool) []T {
	if cap(spare) < q.size {
		spare = make([]T, 0, q.size)
	}
	q.mu.Lock()
	out := q.buf
	q.buf = spare[:0]
	q.oldest = time.Time{}
	q.closed = q.closed || close
	q.mu.Unlock()
	return out
}

type dumper struct {
	dir   string
	ops   *ring[OpRangeRecord]
	marks *ring[OpMarkRecord]
	mem   *ring[MemoryUsageRecord]
	every time.Duration

	files [3]*os.File
	bufs  [3]*bufio.Writer
	// spare buffers swapped with the rings
	spareOps   []OpRangeRecord
	spareMarks []OpMarkRecord
	spareMem   []MemoryUsageRecord
	enc        []byte
	err        error

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func newDumper(dir string, size int, every time.Duration) *dumper {
	d := &dumper{
		dir: dir, ops: newRing[OpRangeRecord](size), marks: newRing[OpMarkRecord](size),
		mem: newRing[MemoryUsageRecord](size), every: every,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go func() { defer crash.Recover(); d.loop() }()
	return d
}

// loop polls like torch_npu's consumer (1024 µs sleeps) and drains a queue
// once more than 256 records wait (or FlushEvery passed).
func (d *dumper) loop() {
	defer close(d.done)
	t := time.NewTicker(1024 * time.Microsecond)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			d.drainAll(true)
			return
		case now := <-t.C:
			if d.ops.ready(now, d.every) {
				d.drainOps(false)
			}
			if d.marks.ready(now, d.every) {
				d.drainMarks(false)
			}
			if d.mem.ready(now, d.every) {
				d.drainMem(false)
			}
			if d.every > 0 {
				d.flush()
			}
		}
	}
}

var dumpFiles = [3]string{FileOpRange, FileOpMark, FileMemory}

// writer opens FRAMEWORK/<file> on first use: "ab", 0640, 4 KiB buffer (stdio-like).
func (d *dumper) writer(i int) *bufio.Writer {
	if d.bufs[i] != nil || d.err != nil {
		return d.bufs[i]
	}
	p := filepath.Join(d.dir, dumpFiles[i])
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err == nil {
		err = os.Chmod(p, 0o640)
	}
	if err != nil {
		d.err = err
		return nil
	}
	d.files[i] = f
	d.bufs[i] = bufio.NewWriterSize(f, 4096)
	return d.bufs[i]
}

func (d *dumper) write(i int, b []byte) {
	if w := d.writer(i); w != nil {
		if _, err := w.Write(b); err != nil && d.err == nil {
			d.err = err
		}
	}
}

// drain encodes what q holds into file i of dumpFiles, keeping the emptied
// buffer as the next spare.
func drain[T any](d *dumper, q *ring[T], spare *[]T, i int, final bool, appendRec func([]byte, *T) []byte) {
	recs := q.swap(*spare, final)
	d.enc = d.enc[:0]
	for k := range recs {
		d.enc = appendRec(d.enc, &recs[k])
	}
	clear(recs) // drop string references
	*spare = recs[:0]
	if len(d.enc) > 0 {
		d.write(i, d.enc)
	}
}

func (d *dumper) drainOps(final bool)   { drain(d, d.ops, &d.spareOps, 0, final, AppendOpRange) }
func (d *dumper) drainMarks(final bool) { drain(d, d.marks, &d.spareMarks, 1, final, AppendOpMark) }
func (d *dumper) drainMem(final bool)   { drain(d, d.mem, &d.spareMem, 2, final, AppendMemoryUsage) }

func (d *dumper) drainAll(final bool) {
	d.drainOps(final)
	d.drainMarks(final)
	d.drainMem(final)
}

func (d *dumper) flush() {
	for _, w := range d.bufs {
		if w != nil {
			if err := w.Flush(); err != nil && d.err == nil {
				d.err = err
			}
		}
	}
}

// close drains every queue, flushes and closes the files.
func (d *dumper) close() error {
	d.once.Do(func() {
		close(d.stop)
		<-d.done
		d.flush()
		for _, f := range d.files {
			if f != nil {
				if err := f.Close(); err != nil && d.err == nil {
					d.err = err
				}
			}
		}
	})
	if d.err != nil {
		return fmt.Errorf("profiler: writing %s: %w", d.dir, d.err)
	}
	return nil
}
