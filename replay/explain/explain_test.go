package explain

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/memusage"
	"github.com/npumon/npumon/replay/whatif"
	"github.com/npumon/npumon/replay/whatif/sim"
)

func TestFormatFrame(t *testing.T) {
	f := snapshot.Frame{Filename: `D:\Dev\assignment2-systems\cs336-basics\cs336_basics\model.py`, Line: 39, Name: "forward"}
	for i, c := range []struct {
		w    int
		want string
	}{
		{0, `forward  D:\Dev\assignment2-systems\cs336-basics\cs336_basics\model.py:39`},
		{200, `forward  D:\Dev\assignment2-systems\cs336-basics\cs336_basics\model.py:39`},
		{40, `forward  …\cs336_basics\model.py:39`},
		{30, `forward  …\model.py:39`},
		{24, `forward  …\model.py:39`},
		{18, `fo…  …\model.py:39`},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got := FormatFrame(f, c.w)
			if got != c.want {
				t.Errorf("width %d: %q, want %q", c.w, got, c.want)
			}
			if c.w > 0 && len([]rune(got)) > c.w {
				t.Errorf("width %d: %q is %d runes", c.w, got, len([]rune(got)))
			}
		})
	}
	if got := TruncLeft("/a/b/c.py", 6); got != "…/c.py" {
		t.Errorf("TruncLeft %q", got)
	}
	if got := TruncRight("abcdef", 4); got != "abc…" {
		t.Errorf("TruncRight %q", got)
	}
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{{"oom_snapshot_1.pickle", 12, "oom_s…pickle"}, {"abcdef", 6, "abcdef"}, {"abcdef", 5, "ab…ef"}, {"abcdef", 1, "…"}, {"äöüßéè", 4, "ä…éè"}} {
		if got := TruncMiddle(c.s, c.n); got != c.want {
			t.Errorf("TruncMiddle(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}

func TestCallsite(t *testing.T) {
	fr := func(file string) snapshot.Frame { return snapshot.Frame{Filename: file, Line: 1, Name: "f"} }
	g := &Grouper{}
	for i, c := range []struct {
		stack []string
		want  string
	}{
		{[]string{"/usr/lib/python3/dist-packages/torch/nn/functional.py", "/job/model.py"}, "/job/model.py"},
		{[]string{`C:\venv\Lib\site-packages\einops\einops.py`, `C:\job\train.py`}, `C:\job\train.py`},
		{[]string{"torch/nn/modules/linear.py", "model.py"}, "model.py"},
		{[]string{"torch_npu/npu/memory.py", "train.py"}, "train.py"},
		{[]string{"<frozen runpy>", "/usr/lib/python3.11/runpy.py", `C:\Python311\Lib\runpy.py`, "??", "", "aten/src/ATen/native/X.cpp", "/job/x.py"}, "/job/x.py"},
		{[]string{"/opt/torchvision/ops.py"}, "/opt/torchvision/ops.py"}, // torch as a prefix of another name is user code
		{[]string{"torch/a.py", "torch/b.py"}, "torch/a.py"},             // only library frames: the innermost
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var st snapshot.Stack
			for _, f := range c.stack {
				st = append(st, fr(f))
			}
			if got, _ := g.Callsite(st); got.Label != FrameKey(fr(c.want)) {
				t.Errorf("%v: call site %q, want %q", c.stack, got.Label, c.want)
			}
		})
	}
	g.Library = regexp.MustCompile(`^/job/model\.py$`)
	if got, _ := g.Callsite(snapshot.Stack{fr("/job/model.py"), fr("torch/x.py")}); got.Label != FrameKey(fr("torch/x.py")) {
		t.Errorf("custom library: %q", got.Label)
	}
	if _, ok := g.Callsite(nil); ok {
		t.Error("empty stack has a call site")
	}
}

func TestSizeClassAndParse(t *testing.T) {
	for n, want := range map[int64]string{512: "< 1 MiB", 1 << 20: "1-10 MiB", 50 << 20: "10-100 MiB", 2 << 30: "1-10 GiB", 20 << 30: ">= 10 GiB"} {
		if got := SizeClass(n); got != want {
			t.Errorf("SizeClass(%d) = %q, want %q", n, got, want)
		}
	}
	if _, err := ParseBy("colour"); err == nil {
		t.Error("ParseBy accepted colour")
	}
}

func leakDevice(t *testing.T) *Device {
	t.Helper()
	c, err := replay.DecodeFile("../testdata/leak_steps.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDevice(c, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestAt(t *testing.T) {
	d := leakDevice(t)
	for spec, want := range map[string]int{"end": 35, "": 35, "peak": 30, "oom": 35, "oom:1": 35, "#-1": -1, "#7": 7,
		"1710000000000003": -1, "1710000000000005": 0, "1710000000000012": 1, "1710000000009999": 35} {
		m, err := At(d.Timeline, spec)
		if err != nil || m.Index != want {
			t.Errorf("At(%q) = %+v, %v; want index %d", spec, m, err, want)
		}
	}
	for _, bad := range []string{"oom:2", "oom:0", "oom:x", "#36", "#-2", "#x", "later"} {
		if _, err := At(d.Timeline, bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("At(%q): %v", bad, err)
		}
	}
}

func TestAnnotationOpsAndSteps(t *testing.T) {
	d := leakDevice(t)
	steps := d.Ops.Steps()
	if len(steps) != 6 || steps[0].Step != 1 || steps[5].Step != 6 {
		t.Fatalf("steps %+v", steps)
	}
	pts := StepPoints(d.Timeline, steps)
	if len(pts) != 6 {
		t.Fatalf("step points %+v", pts)
	}
	// the softmax allocation is inside aten::softmax inside model.forward
	e := &d.Timeline.Entries[2]
	if e.Action != snapshot.ActionAlloc || d.Ops.At(e.TimeUS) != "aten::softmax" {
		t.Errorf("entry 2 (%s) in %q", e.Action, d.Ops.At(e.TimeUS))
	}
	// user_defined entries (torch 2.4) pair into ranges too
	s := &snapshot.Snapshot{Stacks: []snapshot.Stack{nil,
		{{Name: "START", Filename: "ProfilerStep#4"}}, {{Name: "END", Filename: "ProfilerStep#4"}}},
		DeviceTraces: [][]snapshot.TraceEntry{{
			{Action: snapshot.ActionUserDefined, Frames: 1, TimeUS: 10},
			{Action: snapshot.ActionUserDefined, Frames: 2, TimeUS: 20},
			{Action: snapshot.ActionUserDefined, Frames: 1, TimeUS: 30}, // never closed: dropped
		}}}
	ops := replay.AnnotationOps(s, 0)
	if len(ops) != 1 || !ops[0].IsStep || ops[0].Step != 4 || ops[0].StartUS != 10 || ops[0].EndUS != 20 {
		t.Errorf("user_defined ranges %+v", ops)
	}
}

func TestDiffDevices(t *testing.T) {
	a, b := leakDevice(t), leakDevice(t)
	d := DiffDevices(a, b, &Grouper{By: ByCallsite})
	if len(d.Groups) != 2 {
		t.Fatalf("groups %+v", d.Groups)
	}
	for _, g := range d.Groups {
		if g.DeltaBytes != 0 || g.BornCount != 0 || g.FreedCount != 0 || len(g.Frames) == 0 {
			t.Errorf("same file twice: %+v", g)
		}
	}
	d2, err := DiffMoments(a, "#-1", "end", &Grouper{By: BySize})
	if err != nil || len(d2.Groups) == 0 || d2.Groups[0].DeltaBytes <= 0 {
		t.Fatalf("%v %+v", err, d2)
	}
}

// TestExplainPeakWithoutOOM: without an oom entry the peak is explained.
func TestExplainPeakWithoutOOM(t *testing.T) {
	c, err := replay.DecodeFile("../testdata/cuda21_p4.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// drop the oom entry: the peak is explained instead
	tr := c.Snapshot.DeviceTraces[0]
	for i := range tr {
		if tr[i].Action == snapshot.ActionOOM {
			tr[i].Action = snapshot.ActionSnapshot
		}
	}
	e, err := Explain(context.Background(), c, Options{Simulate: sim.Simulate, WhatIf: true})
	if err != nil {
		t.Fatal(err)
	}
	o := e.Devices[0].OOMs[0]
	if o.Kind != "peak" || o.Verdict != "none" || o.DeviceFreeBytes != nil || len(o.WhatIf) != 3 || o.WhatIf[0].Conf != "baseline" {
		t.Errorf("peak %+v", o)
	}
	if o.WhatIf[0].Verdict != whatif.VerdictReproduces || o.WhatIf[0].Fits {
		t.Errorf("the recording's own settings reproduce its trace, and the baseline is no fix: %+v", o.WhatIf)
	}
	if tr := e.Devices[0].WhatIfTrust; tr == nil || !tr.Reproduces {
		t.Errorf("whatif_trust %+v", tr)
	}
}

// TestVerdict: the boundary, and the sentence each verdict gives with the
// figures it rests on.
func TestVerdict(t *testing.T) {
	f := Figures{Reserved: 12, Allocated: 10, CachedFree: 2, LargestCachedFree: 1}
	if f.Verdict(5, 2) != "shortage" || f.Verdict(5, 3) != "fragmentation" {
		t.Error("verdict boundary: allocated + requested > reserved + free is a shortage")
	}
	size := func(n int64) string { return fmt.Sprintf("%dB", n) }
	for _, c := range []struct {
		f               Figures
		requested, free int64
		want            []string
	}{
		{f, 5, 2, []string{"10B allocated + 5B requested exceed 12B reserved + 2B free", "no allocator setting"}},
		{f, 5, 3, []string{"2B cached free + 3B free on the device cover the 5B requested", "largest cached block is 1B", "not in one piece"}},
		{Figures{Reserved: 12, Allocated: 4, CachedFree: 8, LargestCachedFree: 8}, 5, 0, []string{"a cached block of 8B would hold the 5B requested", "another stream or pool"}},
		{f, 5, 7, []string{"the device reports 7B free, more than the 5B requested, but not in one range", "largest cached block is 1B"}},
		{Figures{Reserved: 12, Allocated: 4, CachedFree: 2, LargestCachedFree: 2}, 5, 1, []string{"6B of the reserved bytes are freed but still in use on another stream", "2B cached free + 1B free on the device do not cover the 5B requested"}},
	} {
		r := c.f.Reason(c.requested, c.free, size)
		for _, w := range c.want {
			if !strings.Contains(r, w) {
				t.Errorf("%+v, %d requested, %d free: %q lacks %q", c.f, c.requested, c.free, r, w)
			}
		}
	}
}

// Text output names a moment by the wall clock and the epoch µs both.
func TestTimeText(t *testing.T) {
	defer func(l *time.Location) { time.Local = l }(time.Local)
	time.Local = time.UTC
	if got := timeText(1796146835856249); got != "(2026-12-01 17:40:35.856249, 1796146835856249 µs)" {
		t.Errorf("timeText: %q", got)
	}
}

// TestExplainTextNativeStacks: on the CUDA training dump (backward-thread
// stacks of C++ frames only) the text names the autograd nodes, and the
// stack it prints folds the native frames around the node.
func TestExplainTextNativeStacks(t *testing.T) {
	c := decode(t, fixture.Path(t, "snapshots/cuda-silmont-mem_snapshot.pickle"))
	e, err := Explain(context.Background(), c, Options{NoWhatIf: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := e.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"      … 23 native frames\n      torch::autograd::generated::DivBackward0::apply(",
		"  DivBackward0 (backward)\n",
		"  BmmBackward0 (backward)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain text lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"torch::unwind", "execute_native_thread_routine", "thread48.o"} {
		if strings.Contains(out, bad) {
			t.Errorf("explain text names %q:\n%s", bad, out)
		}
	}
	if n := len(e.Devices[0].OOMs[0].Frames); n != 32 {
		t.Errorf("JSON frames: %d, want the whole stack of 32", n)
	}
}

// TestExplainTextNoEvents: a trace that changes nothing says memory
// history was not being recorded.
func TestExplainTextNoEvents(t *testing.T) {
	c, err := replay.DecodeFile("../testdata/cuda21_p4.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Snapshot.DeviceTraces[0] = []snapshot.TraceEntry{{Action: snapshot.ActionSnapshot}}
	e, err := Explain(context.Background(), c, Options{NoWhatIf: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	e.WriteText(&b)
	if !strings.Contains(b.String(), "the trace holds no events: memory history was not being recorded") {
		t.Errorf("no-events text:\n%s", b.String())
	}
}

// TestByStackSkipsNativePrefix: --by stack keys start at the first frame
// that is not native, so the unwinder prefix every stack shares is gone.
func TestByStackSkipsNativePrefix(t *testing.T) {
	c := decode(t, fixture.Path(t, "snapshots/cuda-silmont-mem_snapshot.pickle"))
	d, err := NewDevice(c, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.Holders("peak", d.Grouper(ByStack), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Groups) < 3 {
		t.Fatalf("%d groups", len(h.Groups))
	}
	for _, g := range h.Groups {
		if strings.HasPrefix(g.Key, "torch::unwind") || strings.HasPrefix(g.Key, "torch::CapturedTraceback") {
			t.Errorf("stack key starts at the unwinder: %.120s", g.Key)
		}
		if len(g.Frames) < 20 {
			t.Errorf("JSON frames cut: %d", len(g.Frames))
		}
	}
}

// TestExplainOutsideAllocator: with a memUsageInfo CSV for the device,
// the explanation carries its modules and the oom verdict's text says how
// much of the device they hold, by module.
func TestExplainOutsideAllocator(t *testing.T) {
	c, err := replay.DecodeFile("../testdata/cuda21_p4.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := memusage.Read("../memusage/testdata/device_0_memUsageInfo_20261201103016.csv")
	if err != nil {
		t.Fatal(err)
	}
	c.Path = "oom_snapshot_7526_20261201103015.pickle" // its stamp: 1 s before the CSV's
	other := &memusage.File{Device: 1, Modules: []memusage.Module{{Name: "HCCL", Cur: 1}}}
	e, err := Explain(context.Background(), c, Options{NoWhatIf: true, MemUsage: []*memusage.File{other, f}})
	if err != nil {
		t.Fatal(err)
	}
	out := e.Devices[0].OutsideAllocator
	if out == nil || out.TotalBytes != (1228+310+64)*memusage.MiB || len(out.Modules) != 4 || out.OffsetS == nil || *out.OffsetS != 1 {
		t.Fatalf("outside_allocator %+v", out)
	}
	var b strings.Builder
	e.WriteText(&b)
	o := e.Devices[0].OOMs[0]
	want := "1.56 GiB of the device is held outside the caching allocator (device_0_memUsageInfo_20261201103016.csv, 1 s after the snapshot): HCCL 1.20 GiB, RUNTIME 310.00 MiB, AICPU 64.00 MiB"
	if o.Verdict == "shortage" {
		want = "is not the allocator's to give: " + want
	}
	if !strings.Contains(b.String(), "  verdict: "+o.Verdict+"\n") || !strings.Contains(b.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, b.String())
	}
	// the shortage sentence sets the modules beside reserved and free
	s := out.Sentence(true, Figures{Reserved: 30 << 30}, 1<<30, bytesize.Torch)
	if !strings.HasPrefix(s, "the device's memory beyond the 30.00 GiB reserved and 1024.00 MiB free is not the allocator's to give: 1.56 GiB of the device") {
		t.Errorf("shortage sentence %q", s)
	}
	off := int64(-150)
	out.OffsetS = &off
	if s := out.Sentence(false, Figures{}, 0, bytesize.Torch); !strings.Contains(s, "(device_0_memUsageInfo_20261201103016.csv, 2 min before the snapshot)") {
		t.Errorf("offset %q", s)
	}
	// without a CSV nothing is said
	e, _ = Explain(context.Background(), c, Options{NoWhatIf: true})
	b.Reset()
	e.WriteText(&b)
	if e.Devices[0].OutsideAllocator != nil || strings.Contains(b.String(), "outside the caching allocator") {
		t.Errorf("without a CSV:\n%s", b.String())
	}
}

// TestExplainWhatIfOnlyWhereItAnswers: without an oom entry the what-if
// runs only on request (--whatif, --conf) or for a peak near a given
// device size; otherwise the note says why it did not and how to run it.
func TestExplainWhatIfOnlyWhereItAnswers(t *testing.T) {
	c, err := replay.DecodeFile("../testdata/cuda21_p4.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Snapshot.DeviceTraces[0]
	for i := range tr {
		if tr[i].Action == snapshot.ActionOOM {
			tr[i].Action = snapshot.ActionSnapshot
		}
	}
	d, err := NewDevice(c, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	peak := PeakReserved(d.Timeline)
	if peak <= 0 {
		t.Fatalf("peak reserved %d", peak)
	}
	for _, tt := range []struct {
		name string
		opts Options
		runs bool
		note string
	}{
		{"default", Options{}, false, "what-if not run: no oom entry (--whatif runs it)"},
		{"whatif", Options{WhatIf: true}, true, ""},
		{"conf", Options{Confs: []string{"expandable_segments:True"}}, true, ""},
		{"near device", Options{DeviceMem: peak + peak/20}, true, ""},
		{"far from device", Options{DeviceMem: 4 * peak}, false, "what-if not run: no oom entry, and the recorded peak reserved"},
		{"no-whatif wins", Options{WhatIf: true, NoWhatIf: true}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Simulate = sim.Simulate
			e, err := Explain(context.Background(), c, opts)
			if err != nil {
				t.Fatal(err)
			}
			dev := e.Devices[0]
			if ran := dev.WhatIfTrust != nil; ran != tt.runs || (len(dev.OOMs[0].WhatIf) > 0) != tt.runs {
				t.Errorf("what-if ran: %v (%d runs), want %v", ran, len(dev.OOMs[0].WhatIf), tt.runs)
			}
			if !strings.HasPrefix(dev.WhatIfNote, tt.note) || (tt.note == "") != (dev.WhatIfNote == "") {
				t.Errorf("note %q, want %q…", dev.WhatIfNote, tt.note)
			}
		})
	}
}
