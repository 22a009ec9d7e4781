package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay/category"
)

// Scenario is the memory pattern a run shows on top of plain training.
type Scenario string

// Scenarios.
const (
	Steady        Scenario = "steady"        // static shapes: memory reaches a plateau
	Fragmentation Scenario = "fragmentation" // varying sequence lengths and odd-sized long-lived tensors defeat reuse
	Leak          Scenario = "leak"          // one activation kept every step
	OOM           Scenario = "oom"           // a cache grows by concatenation until the device runs out
)

// Scenarios lists every scenario, in the order help texts show them.
var Scenarios = []Scenario{Steady, Fragmentation, Leak, OOM}

// ParseScenario returns the named scenario.
func ParseScenario(s string) (Scenario, error) {
	for _, sc := range Scenarios {
		if string(sc) == s {
			return sc, nil
		}
	}
	names := make([]string, len(Scenarios))
	for i, sc := range Scenarios {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("unknown scenario %q (want one of %s)", s, strings.Join(names, ", "))
}

// OOMPolicy is what a run does after an out-of-memory error.
type OOMPolicy string

// OOM policies.
const (
	Recover OOMPolicy = "recover" // drop what the scenario hoarded, empty_cache, carry on
	Stop    OOMPolicy = "stop"    // end the run with the OOM error
)

// Config configures a Workload. Zero fields take the defaults.
type Config struct {
	Scenario Scenario // default Steady
	Seed     uint64
	Layers   int // transformer blocks; default 8
	// ExtraLayers are added after the model is sized to the device, as a
	// pipeline stage holding more layers than planned: its memory grows
	// with them (demo --ranks skews ranks this way).
	ExtraLayers int
	Rate        float64 // training steps per second of simulated time; default 2
	// Paced makes the simulated clock follow the wall clock: the run sleeps
	// whenever it is ahead, and jumps forward when it fell far behind.
	Paced     bool
	DeviceMem int64     // physical HBM bytes; default 64 GiB (61 GiB usable)
	OnOOM     OOMPolicy // default Recover
	// Steps ends Run after this many steps; 0 runs until the context ends.
	Steps int
	// Start is the simulated clock's start; zero means now.
	Start time.Time
	// AllocConf is a PYTORCH_NPU_ALLOC_CONF string.
	AllocConf string
	// HistoryEntries caps the allocator's trace ring (default 100000).
	HistoryEntries int
	// PID names output files and stamps profiler records; default os.Getpid().
	PID int

	// Out is where snapshots and profiler directories are written; empty
	// writes nothing.
	Out string
	// SnapshotEvery writes a snapshot pickle every this many steps (default
	// 10; negative: only on OOM).
	SnapshotEvery int
	// Profile is the profiler schedule of the directories under Out (default
	// wait 1, warmup 1, active 3, repeating); NoProfile writes none.
	Profile   *profiler.Schedule
	NoProfile bool
	// NoProfiler runs the job as one that records memory history without
	// a profiler: no profiler directories (NoProfile) and no
	// ProfilerStep#N ranges in the snapshots' external_annotations.
	NoProfiler bool

	// OnOp sees every finished op (step markers included), on Run's
	// goroutine; it must not block.
	OnOp func(store.Op)
	// OnStep sees every finished step, on Run's goroutine.
	OnStep func(StepInfo)
	// OnAlloc sees every allocation made, with what the job knows it
	// holds: the ground truth the category rules (replay/category) are
	// tested against. It is not written into any snapshot.
	OnAlloc func(addr uint64, size int64, c category.Category)
	// Logf, when set, receives one line per notable event (OOM, recovery,
	// files written); calls are serialised but come from two goroutines.
	Logf func(format string, args ...any)
}

// StepInfo describes a finished step.
type StepInfo struct {
	Step           int
	StartUS, EndUS int64 // simulated epoch µs
	OOM            bool  // the step ended in an out-of-memory error
	Recovered      bool  // ... and the run recovered with empty_cache
	Seq            int64 // sequence length used
	Stats          allocator.Stats
}

// ErrStopped wraps the OOM error that ends a run under the Stop policy.
var ErrStopped = errors.New("workload stopped")

// Workload is one simulated training job.
type Workload struct {
	cfg   Config
	clock *acl.ManualClock
	rt    *acl.Runtime
	dev   *acl.Device
	ca    *allocator.Allocator // the caching allocator
	rng   *rand.Rand
	shape Shape
	pid   int
	// lastOOMName is the name of the newest OOM dump: torch_npu names them
	// by the second, so a second OOM within one second would overwrite the
	// first — the one that explains the run.
	lastOOMName string

	compute, comm acl.Stream
	commEv        acl.Event

	// persistent state
	params, grads, adam1, adam2 []tensor
	paramNames                  []string
	paramSizes                  []int64
	leaked                      []tensor
	hoard                       tensor
	lingering                   []lingerer
	// step-scoped tensors, freed when a step aborts
	live map[uint64]tensor

	step      int
	seqLen    int64 // this step's sequence length
	stepStart time.Time
	fail      error // sticky: set by the first failed call of a step
	ctx       context.Context
	setup     bool
	stopped   bool
	opSeq     int64
	stepAnns  []snapshot.Annotation // ProfilerStep#N ranges, newest last (bounded)
	stepT     time.Duration         // simulated duration of a step
	phaseDur  [3]time.Duration

	rec       *profiler.Recorder
	mem       memTotals // memory tracker state
	memDetach func()
	profDiff  int64 // epoch ns − raw ns of the profiler clock
	detach    []func()
	writer    *snapWriter
	logMu     sync.Mutex
	closeMu   sync.Mutex
	closed    bool
}

// tensor is a device allocation the workload holds.
type tensor struct {
	ptr  uint64
	size int64
}

// lingerer is a long-lived odd-sized tensor of the fragmentation scenario.
type lingerer struct {
	t     tensor
	until int // step after which it is freed
}

// host overhead charged to the simulated clock per allocator call, so that
// trace entries carry distinct times as in a real process.
const callOverhead = 2 * time.Microsecond

// New builds the device, allocator and (with Out) profiler of a run. Nothing
// is allocated until the first step; attach trackers before Run.
func New(cfg Config) (*Workload, error) {
	if cfg.Scenario == "" {
		cfg.Scenario = Steady
	}
	if _, err := ParseScenario(string(cfg.Scenario)); err != nil {
		return nil, err
	}
	if cfg.OnOOM == "" {
		cfg.OnOOM = Recover
	}
	if cfg.OnOOM != Recover && cfg.OnOOM != Stop {
		return nil, fmt.Errorf("unknown OOM policy %q (want recover or stop)", cfg.OnOOM)
	}
	if cfg.Layers <= 0 {
		cfg.Layers = 8
	}
	if cfg.Layers > 256 {
		return nil, fmt.Errorf("layers %d: at most 256", cfg.Layers)
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 2
	}
	if cfg.DeviceMem <= 0 {
		cfg.DeviceMem = acl.DefaultHBMBytes
	}
	if cfg.DeviceMem < 256*acl.MiB {
		return nil, fmt.Errorf("device memory %s: at least 256 MiB", bytesize.Torch(cfg.DeviceMem))
	}
	if cfg.HistoryEntries <= 0 {
		cfg.HistoryEntries = 100_000
	}
	if cfg.PID == 0 {
		cfg.PID = os.Getpid()
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 10
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now()
	}

	w := &Workload{cfg: cfg, pid: cfg.PID, live: map[uint64]tensor{}, ctx: context.Background()}
	w.clock = acl.NewManualClock(cfg.Start)
	// Same share kept by firmware as on a 64 GiB part (3 GiB).
	w.rt = acl.NewRuntime(acl.Config{Clock: w.clock, Devices: []acl.DeviceSpec{{
		HBMBytes: cfg.DeviceMem, SystemReserved: cfg.DeviceMem * 3 / 64}}})
	w.dev, _ = w.rt.Device(0)
	acfg := config.DefaultConfig(config.FlavourNPU)
	if cfg.AllocConf != "" {
		var err error
		if acfg, err = config.ParseConfig(cfg.AllocConf); err != nil {
			return nil, err
		}
	}
	var err error
	if w.ca, err = allocator.New(w.dev, acfg, allocator.WithClock(w.clock)); err != nil {
		return nil, err
	}
	w.ca.RecordHistory(true, allocator.RecordAll, cfg.HistoryEntries)
	if w.compute, err = w.dev.CreateStream(); err != nil {
		return nil, err
	}
	if w.comm, err = w.dev.CreateStream(); err != nil {
		return nil, err
	}
	if w.commEv, err = w.dev.CreateEvent(); err != nil {
		return nil, err
	}
	_, usable, _ := w.dev.GetMemInfo(acl.MemHBM)
	w.shape = sizeModel(cfg.Layers, usable)
	w.shape.Layers += cfg.ExtraLayers
	w.seqLen = w.shape.Seq
	w.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	w.stepT = time.Duration(float64(time.Second) / cfg.Rate)
	// forward, backward, optimizer; the rest of a step is data loading.
	w.phaseDur = [3]time.Duration{w.stepT * 30 / 100, w.stepT * 55 / 100, w.stepT * 10 / 100}

	if cfg.Out != "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			return nil, err
		}
		w.writer = newSnapWriter(w.logf)
		w.detach = append(w.detach, w.ca.AttachOOMObserver(w.onOOM))
		if !cfg.NoProfile && !cfg.NoProfiler {
			if err := w.startProfiler(); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// Allocator is the instrumented allocator (attach trackers here).
func (w *Workload) Allocator() *allocator.Allocator { return w.ca }

// Device is the simulated device.
func (w *Workload) Device() *acl.Device { return w.dev }

// Shape is the model the run trains.
func (w *Workload) Shape() Shape { return w.shape }

// Config returns the configuration with defaults filled in.
func (w *Workload) Config() Config { return w.cfg }

// Now is the simulated clock.
func (w *Workload) Now() time.Time { return w.clock.Now() }

// DeviceInfo describes the device for monitor sources.
func (w *Workload) DeviceInfo() store.DeviceInfo {
	i := w.dev.Info()
	return store.DeviceInfo{ID: i.ID, Name: i.Name, HBMTotal: i.HBMTotal, HBMUsed: i.HBMUsed, Streams: i.Streams}
}

// StepNum is the number of steps finished.
func (w *Workload) StepNum() int { return w.step }

// Run trains until ctx ends, Config.Steps steps are done, or an OOM stops
// the run (Stop policy: the error wraps ErrStopped and the OOMError). It
// closes the workload before returning.
func (w *Workload) Run(ctx context.Context) error {
	defer w.Close()
	for w.cfg.Steps <= 0 || w.step < w.cfg.Steps {
		if err := w.Step(ctx); err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
	}
	return nil
}

// Step runs one training step. An OOM inside the step is handled by the
// policy: Recover returns nil, Stop returns an error wrapping ErrStopped.
// A cancelled ctx aborts the step (its tensors freed) and returns ctx.Err().
func (w *Workload) Step(ctx context.Context) error {
	if w.stopped {
		return ErrStopped
	}
	w.ctx = ctx
	w.fail = nil
	if !w.setup {
		w.setupModel()
		if w.fail != nil {
			return w.abort()
		}
		w.setup = true
	}
	w.stepStart = w.clock.Now()
	w.trainStep()
	if w.fail != nil {
		return w.abort()
	}
	w.endStep(false, false)
	return nil
}

// abort frees the step's tensors after a failure and applies the policy.
func (w *Workload) abort() error {
	err := w.fail
	w.fail = nil
	w.releaseLive()
	if ctxErr := w.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var oom *allocator.OOMError
	if !errors.As(err, &oom) {
		w.stopped = true
		return err
	}
	w.logf("step %d: %v", w.step, firstLine(err.Error()))
	if w.cfg.OnOOM == Stop {
		w.stopped = true
		w.endStep(true, false)
		return fmt.Errorf("%w at step %d: %w", ErrStopped, w.step-1, err)
	}
	w.recoverFromOOM()
	if w.fail != nil { // freeing never fails on our own pointers
		w.stopped = true
		return w.fail
	}
	w.endStep(true, true)
	return nil
}

// recoverFromOOM drops what the scenario hoards and the gradients, then
// empties the cache — what a job's except-handler would do.
func (w *Workload) recoverFromOOM() {
	o := w.begin("torch_npu.npu.empty_cache", mainThread)
	w.free(w.hoard)
	w.hoard = tensor{}
	for _, t := range w.leaked {
		w.free(t)
	}
	w.leaked = nil
	for _, l := range w.lingering {
		w.free(l.t)
	}
	w.lingering = nil
	for i := range w.grads {
		w.free(w.grads[i])
		w.grads[i] = tensor{}
	}
	if err := w.ca.EmptyCache(); err != nil && w.fail == nil {
		w.fail = err
	}
	w.end(o, time.Millisecond)
	w.logf("step %d: recovered: freed hoarded tensors and emptied the cache", w.step)
}

// endStep closes step n: the ProfilerStep marker, the profiler schedule,
// the periodic snapshot and OnStep.
func (w *Workload) endStep(oom, recovered bool) {
	n, start := w.step, w.stepStart
	end := w.clock.Now()
	w.emit(store.Op{Name: oprange.StepName(int64(n)), StartUS: start.UnixMicro(), EndUS: end.UnixMicro(),
		Thread: uint64(w.pid), Seq: -1, Step: int64(n), IsStep: true})
	w.noteStep(n, start.UnixMicro(), end.UnixMicro())
	if w.rec != nil {
		w.syncMemoryTracker()
		if err := w.rec.Step(); err != nil {
			w.logf("profiler: %v", err)
		}
	}
	w.step++
	if w.writer != nil && w.cfg.SnapshotEvery > 0 && w.step%w.cfg.SnapshotEvery == 0 {
		w.writer.submit(w.snapshotPath(fmt.Sprintf("snapshot_%d_step%06d", w.pid, n)), w.snapshot())
	}
	if w.cfg.OnStep != nil {
		w.cfg.OnStep(StepInfo{Step: n, StartUS: start.UnixMicro(), EndUS: end.UnixMicro(), OOM: oom,
			Recovered: recovered, Seq: w.seqLen, Stats: w.ca.Stats()})
	}
}

// Close stops the profiler (finishing its directory) and waits for pending
// snapshot files. It is safe to call more than once.
func (w *Workload) Close() error {
	w.closeMu.Lock()
	defer w.closeMu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	if w.rec != nil {
		w.memDetach() // drains the tracker first
		errs = append(errs, w.rec.Stop())
	}
	for _, d := range w.detach {
		d()
	}
	if w.writer != nil {
		errs = append(errs, w.writer.close())
	}
	return errors.Join(errs...)
}

// onOOM is the allocator's OOM observer: like torch_npu's OOM snapshot
// hook, it dumps the state at the failure.
func (w *Workload) onOOM(device int, allocSize, allowedOrTotal, deviceFree int64) {
	if w.writer == nil {
		return
	}
	name := fmt.Sprintf("oom_snapshot_%d_%s", w.pid, w.clock.Now().Format("20060102150405"))
	if name == w.lastOOMName {
		w.logf("oom on device %d: not dumped, %s.pickle of this second is kept", device, name)
		return
	}
	w.lastOOMName = name
	w.writer.submit(w.snapshotPath(name), w.snapshot())
}

// maxStepAnnotations bounds the step ranges a snapshot carries (the trace
// ring holds far fewer steps).
const maxStepAnnotations = 4096

// noteStep records step n's range as the START / END annotations torch
// (≥ 2.5) writes for the profiler's ProfilerStep#N record_function.
func (w *Workload) noteStep(n int, start, end int64) {
	if w.cfg.NoProfiler {
		return
	}
	if len(w.stepAnns) >= 2*maxStepAnnotations {
		w.stepAnns = append(w.stepAnns[:0], w.stepAnns[2:]...)
	}
	name := oprange.StepName(int64(n))
	dev := w.dev.Info().ID
	w.stepAnns = append(w.stepAnns,
		snapshot.Annotation{Name: name, Stage: "START", Device: dev, TimeUS: start},
		snapshot.Annotation{Name: name, Stage: "END", Device: dev, TimeUS: end})
}

// snapshot is the allocator's snapshot with the step annotations so far.
func (w *Workload) snapshot() *snapshot.Snapshot {
	s := w.ca.Snapshot()
	s.ExternalAnnotations = append(s.ExternalAnnotations, w.stepAnns...)
	return s
}

func (w *Workload) logf(format string, args ...any) {
	if w.cfg.Logf != nil {
		w.logMu.Lock()
		defer w.logMu.Unlock()
		w.cfg.Logf(format, args...)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ---- allocation helpers (sticky error: after a failure every call is a no-op) ----

// site is an allocation call site: the Python stack torch would record.
type site []snapshot.Frame

// allocKeep allocates a tensor that outlives the step; c is what it holds.
func (w *Workload) allocKeep(size int64, s site, c category.Category) tensor {
	if w.fail != nil || size <= 0 {
		return tensor{}
	}
	w.clock.Advance(callOverhead)
	p, err := w.ca.MallocWithStack(size, w.compute, s)
	if err != nil {
		w.fail = err
		return tensor{}
	}
	if w.cfg.OnAlloc != nil {
		w.cfg.OnAlloc(p, size, c)
	}
	return tensor{p, size}
}

// alloc allocates a step-scoped tensor.
func (w *Workload) alloc(size int64, s site, c category.Category) tensor {
	t := w.allocKeep(size, s, c)
	if t.ptr != 0 {
		w.live[t.ptr] = t
	}
	return t
}

// free releases t (step-scoped or not); a zero tensor is ignored.
func (w *Workload) free(t tensor) {
	if t.ptr == 0 {
		return
	}
	delete(w.live, t.ptr)
	w.clock.Advance(callOverhead)
	if err := w.ca.Free(t.ptr); err != nil && w.fail == nil {
		w.fail = err
	}
}

// releaseLive frees every step-scoped tensor, in address order so that the
// trace stays deterministic.
func (w *Workload) releaseLive() {
	ptrs := make([]uint64, 0, len(w.live))
	for p := range w.live {
		ptrs = append(ptrs, p)
	}
	slices.Sort(ptrs)
	fail := w.fail
	for _, p := range ptrs {
		w.free(w.live[p])
	}
	w.fail = fail
}
