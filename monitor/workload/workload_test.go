package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

var start = time.Unix(1_764_000_000, 0)

// runSteps runs steps unpaced and returns the workload, its step infos and ops.
func runSteps(t *testing.T, cfg Config, steps int) (*Workload, []StepInfo, []store.Op, error) {
	t.Helper()
	var infos []StepInfo
	var ops []store.Op
	cfg.Steps = steps
	if cfg.Start.IsZero() {
		cfg.Start = start
	}
	cfg.OnStep = func(s StepInfo) { infos = append(infos, s) }
	cfg.OnOp = func(o store.Op) { ops = append(ops, o) }
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = w.Run(context.Background())
	return w, infos, ops, err
}

func current(s allocator.Stats, st allocator.StatArray) int64 { return st[allocator.StatAll].Current }

// TestDeterministic: the same seed gives the same trace — actions,
// addresses, sizes, streams and times — and another seed a different one.
func TestDeterministic(t *testing.T) {
	trace := func(seed uint64) []snapshot.TraceEntry {
		w, _, _, err := runSteps(t, Config{Scenario: Fragmentation, Seed: seed, Layers: 2, DeviceMem: 16 << 30}, 6)
		if err != nil {
			t.Fatal(err)
		}
		return w.Allocator().Snapshot().DeviceTraces[0]
	}
	a, b, c := trace(7), trace(7), trace(8)
	if len(a) < 1000 {
		t.Fatalf("only %d entries", len(a))
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different traces")
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same trace")
	}
}

// TestSteadyPlateau: with static shapes, every step ends with the same
// allocated and reserved bytes once the optimizer states exist, and the
// trace holds the events a training step makes.
func TestSteadyPlateau(t *testing.T) {
	w, infos, _, err := runSteps(t, Config{Seed: 1}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 8 {
		t.Fatalf("%d steps", len(infos))
	}
	for _, s := range infos[3:] {
		if a, r := current(s.Stats, s.Stats.AllocatedBytes), current(s.Stats, s.Stats.ReservedBytes); a != current(infos[2].Stats, infos[2].Stats.AllocatedBytes) ||
			r != current(infos[2].Stats, infos[2].Stats.ReservedBytes) {
			t.Errorf("step %d: allocated %d reserved %d, step 2: %d %d", s.Step, a, r,
				current(infos[2].Stats, infos[2].Stats.AllocatedBytes), current(infos[2].Stats, infos[2].Stats.ReservedBytes))
		}
		if s.OOM || s.Stats.NumOOMs != 0 {
			t.Errorf("step %d: OOM in steady", s.Step)
		}
	}
	// Parameters + Adam states stay; activations and gradients are gone.
	static := w.Shape().paramBytes() * (1 + 2*fp32/bf16)
	if a := current(infos[7].Stats, infos[7].Stats.AllocatedBytes); a < static || a > static+static/20 {
		t.Errorf("allocated at step end %d, want ≈ params+states %d", a, static)
	}
	counts := map[snapshot.Action]int{}
	for _, e := range w.Allocator().Snapshot().DeviceTraces[0] {
		counts[e.Action]++
		if e.TimeUS == 0 {
			t.Fatal("entry without time_us")
		}
	}
	for _, a := range []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionSegmentAlloc} {
		if counts[a] == 0 {
			t.Errorf("no %s entries: %v", a, counts)
		}
	}
	// Pending frees: the all-reduce buffers complete later than requested.
	if counts[snapshot.ActionFreeRequested] != counts[snapshot.ActionFreeCompleted] {
		// every block freed is eventually completed once later mallocs run
		t.Logf("free_requested %d, free_completed %d", counts[snapshot.ActionFreeRequested], counts[snapshot.ActionFreeCompleted])
	}
}

// TestRecordStreamDefersFrees: the flat all-reduce buffer is freed while
// the collective is still running, so its free completes later.
func TestRecordStreamDefersFrees(t *testing.T) {
	w, _, _, err := runSteps(t, Config{Seed: 1, Layers: 2}, 3)
	if err != nil {
		t.Fatal(err)
	}
	requested := map[uint64]int64{}
	deferred := 0
	for _, e := range w.Allocator().Snapshot().DeviceTraces[0] {
		switch e.Action {
		case snapshot.ActionFreeRequested:
			requested[e.Addr] = e.TimeUS
		case snapshot.ActionFreeCompleted:
			if t0, ok := requested[e.Addr]; ok && e.TimeUS > t0 {
				deferred++
			}
			delete(requested, e.Addr)
		}
	}
	if deferred == 0 {
		t.Fatal("no free completed after its request")
	}
}

// TestOps: named ops in order inside their steps, on three threads, with
// the comm stream's all-reduce overlapping backward.
func TestOps(t *testing.T) {
	_, infos, ops, err := runSteps(t, Config{Seed: 1, Layers: 2, PID: 100}, 3)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	threads := map[uint64]bool{}
	for _, o := range ops {
		names[o.Name]++
		threads[o.Thread] = true
		if o.EndUS <= o.StartUS {
			t.Errorf("%s: empty range %d..%d", o.Name, o.StartUS, o.EndUS)
		}
		if !o.IsStep && o.Step >= 0 {
			s := infos[o.Step]
			if o.StartUS < s.StartUS || o.StartUS > s.EndUS {
				t.Errorf("%s starts %d outside step %d [%d,%d]", o.Name, o.StartUS, o.Step, s.StartUS, s.EndUS)
			}
		}
	}
	for _, n := range []string{"aten::linear", "aten::softmax", "aten::add_", "aten::layer_norm", "HcclAllReduce",
		"AddmmBackward0", "Optimizer.step#AdamW.step", "ProfilerStep#0", "ProfilerStep#2"} {
		if names[n] == 0 {
			t.Errorf("no %s op", n)
		}
	}
	if !reflect.DeepEqual(threads, map[uint64]bool{100: true, 101: true, 102: true}) {
		t.Errorf("threads %v", threads)
	}
	for i := 1; i < len(infos); i++ {
		if infos[i].StartUS < infos[i-1].EndUS || infos[i].EndUS-infos[i].StartUS < 400_000 {
			t.Errorf("step %d spans %d..%d after %d", i, infos[i].StartUS, infos[i].EndUS, infos[i-1].EndUS)
		}
	}
}

// TestLeakGrows: the leak scenario keeps one activation per step.
func TestLeakGrows(t *testing.T) {
	w, infos, _, err := runSteps(t, Config{Scenario: Leak, Seed: 1, Layers: 2}, 8)
	if err != nil {
		t.Fatal(err)
	}
	d := w.dims()
	for i := 3; i < len(infos); i++ {
		grow := current(infos[i].Stats, infos[i].Stats.AllocatedBytes) - current(infos[i-1].Stats, infos[i-1].Stats.AllocatedBytes)
		if grow < 4*d.tok || grow > 4*d.tok+512 {
			t.Errorf("step %d grew %d, want %d (+ rounding)", i, grow, 4*d.tok)
		}
	}
}

// TestFragmentation: varying shapes leave split cached blocks behind and
// reserve more than the same model with static shapes.
func TestFragmentation(t *testing.T) {
	_, frag, _, err := runSteps(t, Config{Scenario: Fragmentation, Seed: 3, Layers: 4}, 12)
	if err != nil {
		t.Fatal(err)
	}
	_, steady, _, _ := runSteps(t, Config{Seed: 3, Layers: 4}, 12)
	f, s := frag[11].Stats, steady[11].Stats
	if current(f, f.ReservedBytes) <= current(s, s.ReservedBytes) {
		t.Errorf("fragmentation reserved %d ≤ steady %d", current(f, f.ReservedBytes), current(s, s.ReservedBytes))
	}
	if f.InactiveSplitBytes[allocator.StatAll].Peak == 0 {
		t.Error("no inactive split bytes")
	}
	seqs := map[int64]bool{}
	for _, i := range frag {
		seqs[i.Seq] = true
	}
	if len(seqs) < 6 {
		t.Errorf("sequence lengths %v", seqs)
	}
}

// TestOOMRecovers: the oom scenario runs out of memory, recovers with
// empty_cache and does it again (a sawtooth), never stopping.
func TestOOMRecovers(t *testing.T) {
	w, infos, ops, err := runSteps(t, Config{Scenario: OOM, Seed: 1, Layers: 2, DeviceMem: 8 << 30}, 40)
	if err != nil {
		t.Fatal(err)
	}
	var ooms []int
	for _, s := range infos {
		if s.OOM {
			if !s.Recovered {
				t.Errorf("step %d: OOM not recovered", s.Step)
			}
			ooms = append(ooms, s.Step)
		}
	}
	if len(ooms) < 2 {
		t.Fatalf("OOM steps %v, want a repeating pattern", ooms)
	}
	last := infos[len(infos)-1]
	if last.Stats.NumOOMs != int64(len(ooms)) {
		t.Errorf("num_ooms %d, OOM steps %v", last.Stats.NumOOMs, ooms)
	}
	if !slices.ContainsFunc(ops, func(o store.Op) bool { return o.Name == "torch_npu.npu.empty_cache" }) {
		t.Error("no empty_cache op")
	}
	oomEntries := 0
	for _, e := range w.Allocator().Snapshot().DeviceTraces[0] {
		if e.Action == snapshot.ActionOOM {
			oomEntries++
		}
	}
	if oomEntries == 0 {
		t.Error("no oom trace entry")
	}
}

// TestOOMStop: with the stop policy the run ends with the OOM error.
func TestOOMStop(t *testing.T) {
	w, infos, _, err := runSteps(t, Config{Scenario: OOM, Seed: 1, Layers: 2, DeviceMem: 8 << 30, OnOOM: Stop}, 100)
	if !errors.Is(err, ErrStopped) || !errors.Is(err, allocator.ErrOutOfMemory) {
		t.Fatalf("err %v", err)
	}
	if n := len(infos); n == 0 || !infos[n-1].OOM || infos[n-1].Recovered {
		t.Fatalf("last step %+v", infos[len(infos)-1])
	}
	if err := w.Step(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("step after stop: %v", err)
	}
}

// TestOut: snapshot pickles every N steps and on OOM, named as real jobs
// name them, that decode with time_us; profiler cycle directories that read
// back with named ops and steps.
func TestOut(t *testing.T) {
	dir := t.TempDir()
	var logs []string
	w, infos, _, err := runSteps(t, Config{Scenario: OOM, Seed: 1, Layers: 2, DeviceMem: 8 << 30, PID: 4242,
		Out: dir, SnapshotEvery: 4, Logf: func(f string, a ...any) { logs = append(logs, f) }}, 12)
	if err != nil {
		t.Fatal(err)
	}
	if w.Close() != nil {
		t.Fatal("second Close failed")
	}
	oomRe := regexp.MustCompile(`^oom_snapshot_4242_\d{14}\.pickle$`)
	var periodic, oom []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		switch {
		case oomRe.MatchString(e.Name()):
			oom = append(oom, e.Name())
		case strings.HasPrefix(e.Name(), "snapshot_4242_step"):
			periodic = append(periodic, e.Name())
		case strings.HasSuffix(e.Name(), profiler.DirNameSuffix):
		default:
			t.Errorf("unexpected file %s", e.Name())
		}
	}
	want := []string{"snapshot_4242_step000003.pickle", "snapshot_4242_step000007.pickle", "snapshot_4242_step000011.pickle"}
	if !reflect.DeepEqual(periodic, want) {
		t.Errorf("periodic snapshots %v, want %v", periodic, want)
	}
	nOOM := 0
	for _, s := range infos {
		if s.OOM {
			nOOM++
		}
	}
	if nOOM == 0 || len(oom) == 0 {
		t.Fatalf("OOM steps %d, oom snapshots %v", nOOM, oom)
	}
	c, err := replay.DecodeFile(filepath.Join(dir, oom[0]), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Snapshot.HasTimestamps() || c.Format != replay.FormatPickle {
		t.Errorf("oom snapshot: format %s, timestamps %v", c.Format, c.Snapshot.HasTimestamps())
	}
	tr := c.Snapshot.DeviceTraces[0]
	if !slices.ContainsFunc(tr, func(e snapshot.TraceEntry) bool { return e.Action == snapshot.ActionOOM }) {
		t.Error("oom snapshot trace has no oom entry")
	}
	if len(w.Files()) != len(periodic)+len(oom) {
		t.Errorf("Files() %v", w.Files())
	}

	dirs := w.ProfilerDirs()
	if len(dirs) < 2 {
		t.Fatalf("profiler dirs %v", dirs)
	}
	d, err := profiler.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !d.Complete || len(d.Steps) != 3 || len(d.Memory) == 0 {
		t.Fatalf("cycle 0: complete %v steps %v memory %d", d.Complete, d.Steps, len(d.Memory))
	}
	seen := map[string]bool{}
	for _, o := range d.Ops {
		seen[o.Name] = true
	}
	for _, n := range []string{"aten::linear", "aten::softmax", "HcclAllReduce", "ProfilerStep#2"} {
		if !seen[n] {
			t.Errorf("profiler dir has no %s", n)
		}
	}
	// Times in the directory are the simulated epoch times.
	s2 := infos[2]
	for _, st := range d.Steps {
		if st.ID == 2 && (abs(st.StartNS/1000-s2.StartUS) > 1000 || abs(st.EndNS/1000-s2.EndUS) > 1000) {
			t.Errorf("ProfilerStep#2 at %d..%d µs, step ran %d..%d", st.StartNS/1000, st.EndNS/1000, s2.StartUS, s2.EndUS)
		}
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestPacedFollowsWallClock: a paced run keeps simulated time at the wall
// clock and stops promptly when cancelled.
func TestPacedFollowsWallClock(t *testing.T) {
	var step atomic.Int64 // the step of the newest op: steps done
	w, err := New(Config{Seed: 1, Layers: 2, Paced: true, Rate: 10, OnOp: func(op store.Op) { step.Store(op.Step) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	at := make(chan time.Time, 1)
	go func() {
		// cancelled after 400 ms and a finished step, however long a slow
		// machine takes for one (the run is cancelled mid-step then); the
		// minute only bounds a run that never finishes one
		time.Sleep(400 * time.Millisecond)
		for deadline := time.Now().Add(time.Minute); step.Load() < 1 && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
		}
		at <- time.Now()
		cancel()
	}()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	cancelled := <-at
	if el := time.Since(cancelled); el > 2*time.Second {
		t.Fatalf("cancel took %v", el)
	}
	// paced at 10 steps/s: no more steps than the wall clock allows
	if n, most := w.StepNum(), int(cancelled.Sub(t0)/(100*time.Millisecond))+1; n < 1 || n > most {
		t.Errorf("%d steps in %v at 10 steps/s (at most %d)", n, cancelled.Sub(t0), most)
	}
	if d := time.Until(w.Now()); d > 50*time.Millisecond || d < -time.Second {
		t.Errorf("simulated clock %v from the wall clock", d)
	}
	// Cancelled mid-step: nothing of the step stays allocated (gradients
	// do, as in torch until zero_grad).
	s := w.Allocator().Stats()
	static := w.Shape().paramBytes() * (2 + 2*fp32/bf16)
	if a := s.AllocatedBytes[allocator.StatAll].Current; a > static+static/20 {
		t.Errorf("allocated %d after cancel, static %d", a, static)
	}
}

// TestConfigErrors: bad options fail New with a clear message.
func TestConfigErrors(t *testing.T) {
	for i, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scenario: "bogus"}, `unknown scenario "bogus"`},
		{Config{OnOOM: "panic"}, `unknown OOM policy "panic"`},
		{Config{DeviceMem: 1 << 20}, "at least 256 MiB"},
		{Config{Layers: 1000}, "at most 256"},
		{Config{AllocConf: "max_split_size_mb:1"}, "max_split_size_mb"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := New(c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%+v: err %v, want %q", c.cfg, err, c.want)
			}
		})
	}
}

// TestSizeModel: the model fits any device size and layer count.
func TestSizeModel(t *testing.T) {
	for _, mem := range []int64{256 << 20, 1 << 30, 16 << 30, 64 << 30, 128 << 30} {
		for _, layers := range []int{1, 8, 32} {
			w, err := New(Config{Layers: layers, DeviceMem: mem, Steps: 2, Start: start})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := w.Allocator().Stats().NumOOMs; n != 0 && layers <= 32 && mem >= 1<<30 {
				t.Errorf("%s, %d layers: %d OOMs (shape %v)", bytesize.Torch(mem), layers, n, w.Shape())
			}
		}
	}
}

// BenchmarkStep is the cost of one unpaced training step (≈1500 trace
// entries and 250 ops) on the default 8-layer model.
func BenchmarkStep(b *testing.B) {
	w, err := New(Config{Seed: 1, Start: start, HistoryEntries: 1 << 14})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	w.Step(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := w.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMallocFreeBaseline is the allocator alone doing what a step's
// trace holds in count — 750 Malloc/Free pairs (≈1500 entries) of mixed
// sizes, history on — the baseline BenchmarkStep is compared with.
func BenchmarkMallocFreeBaseline(b *testing.B) {
	w, err := New(Config{Seed: 1, Start: start, HistoryEntries: 1 << 14})
	if err != nil {
		b.Fatal(err)
	}
	a := w.Allocator()
	sizes := []int64{4 << 10, 512 << 10, 16 << 20, 96 << 20}
	ptrs := make([]uint64, 0, 750)
	b.ReportAllocs()
	for b.Loop() {
		for i := 0; i < 750; i++ {
			p, err := a.Malloc(sizes[i%len(sizes)], w.compute)
			if err != nil {
				b.Fatal(err)
			}
			ptrs = append(ptrs, p)
			if len(ptrs) == 16 {
				for _, p := range ptrs {
					a.Free(p)
				}
				ptrs = ptrs[:0]
			}
		}
	}
}
