package align_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/monitor/align"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/explain"
)

// demoRun is an OOM run of npumon's demo written as a job writes it: the
// snapshot pickle (whose times are the truth) and its profiler runs.
type demoRun struct {
	capt  *replay.Capture
	snap  *snapshot.Snapshot
	truth [][]int64
	runs  []*profiler.Data
}

func newDemo(t *testing.T) *demoRun { return newDemoFrom(t, false, nil) }

// newDemoFrom is newDemo; with analysed the runs' FRAMEWORK directories
// are removed first, so what is read is the analysed CSV output.
func newDemoFrom(t *testing.T, analysed bool, sched *profiler.Schedule) *demoRun {
	t.Helper()
	dir := t.TempDir()
	w, err := workload.New(workload.Config{Scenario: workload.OOM, OnOOM: workload.Stop, Seed: 3, Steps: 40,
		DeviceMem: 16 << 30, Out: dir, SnapshotEvery: 0, Profile: sched})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Run(context.Background()) // Stop ends with the OOM error
	files := w.Files()
	if len(files) == 0 {
		t.Fatal("no snapshot written")
	}
	c, err := replay.DecodeFile(files[len(files)-1], replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := &demoRun{capt: c, snap: c.Snapshot}
	for _, tr := range d.snap.DeviceTraces {
		ts := make([]int64, len(tr))
		for i := range tr {
			ts[i], tr[i].TimeUS = tr[i].TimeUS, 0 // the torch_npu flavour: no time_us
		}
		d.truth = append(d.truth, ts)
	}
	for _, p := range w.ProfilerDirs() {
		if analysed {
			if err := os.RemoveAll(filepath.Join(p, profiler.FrameworkDir)); err != nil {
				t.Fatal(err)
			}
		}
		pd, err := profiler.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		d.runs = append(d.runs, pd)
	}
	if len(d.runs) == 0 {
		t.Fatal("no profiler runs")
	}
	return d
}

func runsOf(ds []*profiler.Data) []align.Run {
	var out []align.Run
	for _, d := range ds {
		out = append(out, align.Run{Data: d})
	}
	return out
}

// check compares the recovered times with the truth: every exact time
// within the profiler clock's resolution (1 µs), every other one no later
// than its truth. It returns the share of the events inside the profiler
// windows that were matched.
func check(t *testing.T, d *demoRun, res align.Result, from string) float64 {
	t.Helper()
	share, wrong := checkWrong(t, d, res, from)
	if wrong > 0 {
		t.Fatalf("%d entries matched to the wrong record", wrong)
	}
	return share
}

// checkWrong is check counting the matched entries whose time is off
// instead of failing on them.
func checkWrong(t *testing.T, d *demoRun, res align.Result, from string) (float64, int) {
	t.Helper()
	wrong := 0
	dv := res.Device(0)
	if dv == nil || dv.Source != align.SourceRecovered || dv.From != from {
		t.Fatalf("device 0: %+v, refused %v", dv, res.Refused)
	}
	tr, truth := d.snap.DeviceTraces[0], d.truth[0]
	lo, hi := windowOf(d.runs)
	inWin, matchedIn := 0, 0
	for i := range tr {
		got, want := tr[i].TimeUS, truth[i]
		if dv.Exact[i] {
			if got < want-1 || got > want+1 {
				wrong++
				if wrong == 1 {
					t.Logf("entry %d (%v): recovered %d, truth %d", i, tr[i].Action, got, want)
				}
			}
		} else if got > want && wrong == 0 {
			t.Fatalf("entry %d (%v): lower bound %d after the truth %d", i, tr[i].Action, got, want)
		}
		if i > 0 && got < tr[i-1].TimeUS && wrong == 0 {
			t.Fatalf("entry %d: time %d before entry %d's %d", i, got, i-1, tr[i-1].TimeUS)
		}
		if isEvent(tr[i].Action) && inside(want, lo, hi) {
			inWin++
			if dv.Exact[i] {
				matchedIn++
			}
		}
	}
	if inWin == 0 {
		t.Fatal("no event inside the profiler windows")
	}
	return float64(matchedIn) / float64(inWin), wrong
}

func isEvent(a snapshot.Action) bool {
	_, _, ok := profiler.MemoryKindOf(a, 0)
	return ok
}

// windowOf is each run's span of memory records, in µs.
func windowOf(runs []*profiler.Data) (lo, hi []int64) {
	for _, r := range runs {
		switch {
		case len(r.Memory) > 0:
			lo = append(lo, r.Memory[0].TimeUS())
			hi = append(hi, r.Memory[len(r.Memory)-1].TimeUS())
		case len(r.OpMemory) > 0:
			a, b := r.OpMemory[0].AllocNS, r.OpMemory[0].AllocNS
			for _, o := range r.OpMemory {
				a = min(a, o.AllocNS)
				b = max(b, o.AllocNS, o.ReleaseNS, o.ActiveReleaseNS)
			}
			lo, hi = append(lo, a/1000), append(hi, b/1000)
		}
	}
	return
}

func inside(t int64, lo, hi []int64) bool {
	for k := range lo {
		if t >= lo[k] && t <= hi[k] {
			return true
		}
	}
	return false
}

func TestRecoverFramework(t *testing.T) {
	d := newDemo(t)
	res := align.Recover(d.snap, runsOf(d.runs), align.Options{})
	share := check(t, d, res, align.FromFramework)
	dv := res.Device(0)
	t.Logf("framework: %d of %d events matched over the whole trace (%.3f), %.4f of those inside the %d runs' windows",
		dv.Matched, dv.Events, dv.Share(), share, len(d.runs))
	if share < 0.99 {
		t.Errorf("matched share inside the windows %.4f < 0.99", share)
	}
	if len(res.Refused) != 0 {
		t.Errorf("refused %v", res.Refused)
	}
}

func TestRecoverMissingRecords(t *testing.T) {
	d := newDemo(t)
	rng := rand.New(rand.NewSource(1))
	for _, r := range d.runs { // the ring lost 2 % of the records
		kept := r.Memory[:0]
		for _, m := range r.Memory {
			if rng.Intn(50) != 0 {
				kept = append(kept, m)
			}
		}
		r.Memory = kept
	}
	res := align.Recover(d.snap, runsOf(d.runs), align.Options{})
	share, wrong := checkWrong(t, d, res, align.FromFramework)
	dv := res.Device(0)
	t.Logf("2 %% of records lost: %.4f matched inside the windows, %d of %d matched to the wrong record", share, wrong, dv.Matched)
	if share < 0.95 || float64(wrong) > 0.01*float64(dv.Matched) {
		t.Errorf("share %.4f, %d wrong", share, wrong)
	}
}

func TestRecoverOperatorMemory(t *testing.T) {
	d := newDemoFrom(t, true, nil)
	for _, r := range d.runs {
		r.Memory = nil // operator_memory.csv alone
	}
	res := align.Recover(d.snap, runsOf(d.runs), align.Options{})
	share, wrong := checkWrong(t, d, res, align.FromOperatorMemory)
	t.Logf("operator_memory.csv only: %.4f matched inside the windows, %d of %d wrong", share, wrong, res.Device(0).Matched)
	if share < 0.99 || wrong > 0 {
		t.Errorf("share %.4f, %d wrong", share, wrong)
	}
}

func TestRecoverMemoryRecord(t *testing.T) {
	d := newDemoFrom(t, true, nil)
	for _, r := range d.runs {
		r.OpMemory = nil // memory_record.csv alone
	}
	res := align.Recover(d.snap, runsOf(d.runs), align.Options{})
	share, wrong := checkWrong(t, d, res, align.FromMemoryRecord)
	t.Logf("memory_record.csv only: %.4f matched inside the windows, %d of %d wrong", share, wrong, res.Device(0).Matched)
	// without addresses, two equal events a µs apart can swap: a time
	// off by its neighbour's
	if share < 0.99 || float64(wrong) > 0.001*float64(res.Device(0).Matched) {
		t.Errorf("share %.4f, %d wrong", share, wrong)
	}
}

func TestRefuseOtherProcess(t *testing.T) {
	d := newDemo(t)
	res := align.Recover(d.snap, []align.Run{{Data: d.runs[0], PID: 4242}}, align.Options{PID: 17})
	if len(res.Refused) != 1 || res.Device(0).Source != align.SourceNone {
		t.Fatalf("refused %v, device %+v", res.Refused, res.Device(0))
	}
	t.Log(res.Refused[0])
}

// TestRecoverOOMOp: with a profiler run over the whole job, ≥ 99 % of the
// trace's events get their time and the OOM is attributed to the op the
// timed trace attributes it to.
func TestRecoverOOMOp(t *testing.T) {
	d := newDemoFrom(t, false, &profiler.Schedule{Active: 1000})
	var ops []oprange.Op
	for _, r := range d.runs {
		for _, o := range r.Ops {
			if o.Timed() {
				ops = append(ops, oprange.Op{Name: o.Name, StartUS: o.StartUS(), EndUS: o.EndUS(), IsStep: o.IsStep, Step: o.Step, Seq: -1})
			}
		}
	}
	oomOp := func() (string, int) {
		dv, err := explain.NewDevice(d.capt, 0, ops)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := explain.Explain(context.Background(), d.capt, explain.Options{Ops: ops, NoWhatIf: true, MaxOOMs: 1})
		if err != nil {
			t.Fatal(err)
		}
		_ = dv
		if len(ex.Devices) == 0 || len(ex.Devices[0].OOMs) == 0 || ex.Devices[0].OOMs[0].Kind != "oom" {
			t.Fatalf("no oom explained: %+v", ex.Devices)
		}
		o := ex.Devices[0].OOMs[0]
		return fmt.Sprint(o.Op), o.Index
	}
	tr := d.snap.DeviceTraces[0]
	saved := append([]snapshot.TraceEntry(nil), tr...)
	for i := range tr {
		tr[i].TimeUS = d.truth[0][i]
	}
	liveOp, liveIdx := oomOp()
	copy(tr, saved)
	res := align.Recover(d.snap, runsOf(d.runs), align.Options{})
	dv := res.Device(0)
	share := check(t, d, res, align.FromFramework)
	gotOp, gotIdx := oomOp()
	t.Logf("whole job profiled: %d of %d events matched (%.4f); the OOM (entry %d) in %s", dv.Matched, dv.Events, dv.Share(), gotIdx, gotOp)
	if dv.Share() < 0.99 || share < 0.99 {
		t.Errorf("share %.4f (%.4f inside the window)", dv.Share(), share)
	}
	if gotIdx != liveIdx || liveOp == "" {
		t.Fatalf("OOM at entry %d in op %q; with the true times entry %d in %q", gotIdx, gotOp, liveIdx, liveOp)
	}
	// The OOM is no profiler event: its time is the interval between the
	// matched entries around it, and the op of the true time is one of the
	// ops that interval meets.
	lo, hi := d.snap.TimeInterval(0, gotIdx)
	if hi == 0 {
		hi = 1 << 62
	}
	found := false
	for _, o := range ops {
		if !o.IsStep && o.Name == liveOp && o.StartUS <= hi && o.EndUS >= lo {
			found = true
		}
	}
	if !found {
		t.Errorf("OOM interval [%d, %d] meets no op %q", lo, hi, liveOp)
	}
	if gotOp != liveOp {
		t.Errorf("the OOM's interval [%d, %d] is attributed to %q, the true time to %q", lo, hi, gotOp, liveOp)
	}
}
