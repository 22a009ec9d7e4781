package profiler

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

// fakeClock advances 1 µs per raw read; epoch = raw + a fixed offset.
type fakeClock struct{ raw atomic.Int64 }

const fakeDiff = 1_764_000_000_000_000_000

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.raw.Store(5_000_000_000_000)
	return c
}
func (c *fakeClock) Raw() int64   { return c.raw.Add(1000) }
func (c *fakeClock) Epoch() int64 { return c.raw.Load() + fakeDiff }

func TestScheduleActions(t *testing.T) {
	s := Schedule{Wait: 1, Warmup: 1, Active: 2, Repeat: 2, SkipFirst: 1}
	want := []ProfilerAction{ActionNone, ActionNone, ActionWarmup, ActionRecord, ActionRecordAndSave,
		ActionNone, ActionWarmup, ActionRecord, ActionRecordAndSave, ActionNone, ActionNone}
	for step, w := range want {
		if g := s.Action(step); g != w {
			t.Errorf("step %d: %s, want %s", step, g, w)
		}
	}
	// active ≤ 0 becomes 1; repeat 0 cycles forever; skip_first_wait skips the first wait.
	s = Schedule{Wait: 2, Active: 0, SkipFirstWait: 1}
	want = []ProfilerAction{ActionRecordAndSave, ActionNone, ActionNone, ActionRecordAndSave}
	for step, w := range want {
		if g := s.Action(step); g != w {
			t.Errorf("skip_first_wait step %d: %s, want %s", step, g, w)
		}
	}
}

// TestRecorderCycles runs a repeat=2 schedule: two cycle directories, each
// finalised and analysed, each holding exactly its RECORD steps.
func TestRecorderCycles(t *testing.T) {
	dir := t.TempDir()
	r, err := New(Config{Dir: dir, Worker: "w_1", Clock: newFakeClock(),
		Schedule: &Schedule{Wait: 1, Warmup: 1, Active: 2, Repeat: 2, SkipFirst: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		s := r.Now()
		r.Op("aten::add", s, r.Now(), int64(i))
		if err := r.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	dirs := r.Dirs()
	if len(dirs) != 2 {
		t.Fatalf("dirs %v", dirs)
	}
	nameRe := regexp.MustCompile(`^w_1_\d{17}_ascend_pt$`)
	wantSteps := [][]int64{{3, 4}, {7, 8}}
	for i, d := range dirs {
		if !nameRe.MatchString(filepath.Base(d)) {
			t.Errorf("dir name %q", filepath.Base(d))
		}
		if _, err := os.Stat(filepath.Join(d, OutputDir, AnalyseDone)); err != nil {
			t.Fatalf("%s not analysed: %v", d, err)
		}
		data, err := ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, s := range data.Steps {
			ids = append(ids, s.ID)
		}
		if !reflect.DeepEqual(ids, wantSteps[i]) {
			t.Errorf("cycle %d steps %v, want %v", i, ids, wantSteps[i])
		}
		// ops recorded during steps 3,4 (cycle 1) carry seq 3,4 and sit in their step
		for _, o := range data.Ops {
			if !o.IsStep && o.Step != o.Seq {
				t.Errorf("cycle %d: op seq %d in step %d", i, o.Seq, o.Step)
			}
		}
	}
	if len(r.Warnings()) != 0 {
		t.Errorf("warnings %v", r.Warnings())
	}
}

// TestRecorderWarmupStopDeletesDir: stopping during warmup deletes the cycle
// dir (docs/reference/profiler-format.md §8.2).
func TestRecorderWarmupStopDeletesDir(t *testing.T) {
	dir := t.TempDir()
	r, _ := New(Config{Dir: dir, Clock: newFakeClock(), Schedule: &Schedule{Warmup: 2, Active: 1}})
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("warmup should have created the cycle dir: %v", ents)
	}
	r.Op("ignored", r.Now(), r.Now(), 0)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	ents, _ = os.ReadDir(dir)
	if len(ents) != 0 || len(r.Dirs()) != 0 || len(r.Warnings()) != 1 {
		t.Fatalf("after stop in warmup: entries %v dirs %v warnings %v", ents, r.Dirs(), r.Warnings())
	}
}

// TestRecorderDropsWhenFull: a full ring drops and counts, never blocks.
func TestRecorderDropsWhenFull(t *testing.T) {
	dir := t.TempDir()
	r, _ := New(Config{Dir: dir, Clock: newFakeClock(), RingSize: 4, NoAnalyse: true})
	r.Start()
	for i := 0; i < 1000; i++ {
		r.Op("x", 1, 2, int64(i))
	}
	r.Stop()
	if r.Dropped() != 996 {
		t.Fatalf("dropped %d, want 996", r.Dropped())
	}
	if w := r.Warnings(); len(w) != 1 || !strings.Contains(w[0], "996 records dropped") {
		t.Fatalf("warnings %v", w)
	}
	var recs Records
	if _, err := ReadFrameworkFile(filepath.Join(r.Dirs()[0], FrameworkDir, FileOpRange), &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs.OpRanges) != 4 || recs.OpRanges[3].Seq != 3 {
		t.Fatalf("kept %d records", len(recs.OpRanges))
	}
}

// TestRoundTrip: what the Recorder writes, the FRAMEWORK decoder, the raw
// directory reader and the analysed-output reader all read back identically.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock()
	r, err := New(Config{Dir: dir, Worker: "rt_7", Clock: clk, ProfileMemory: true, RecordShapes: true,
		WithStack: true, WithModules: true, RingSize: 1 << 12, PID: 7, TID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	var ops []OpRangeRecord
	var marks []OpMarkRecord
	var mems []MemoryUsageRecord
	var allocated int64
	for i := 0; i < 600; i++ { // > 256 so the dumper writes while recording
		s := r.Now()
		op := OpRangeRecord{StartNS: s, Seq: int64(i), PID: 7, StartTID: 7 + uint64(i%2), EndTID: 7 + uint64(i%2),
			Name: fmt.Sprintf("aten::op%d", i%5), InputDtypes: "float;int", InputShapes: "2,3;4",
			Stack: "a.py(1): f;b.py(2): g", Module: "nn.Module: M"}
		if i%2 == 1 {
			op.FwdTID, op.Scope = 7, ScopeBackwardFunction
		}
		size := int64(512 * (i + 1))
		var e snapshot.TraceEntry
		e.Action, e.Addr, e.Size, e.Stream, e.TimeUS = snapshot.ActionAlloc, uint64(0x1000*(i+1)), size, 2, 0
		allocated += size
		m, ok := r.MemoryRecordFromTrace(0, &e, allocated, 1<<30, allocated)
		if !ok {
			t.Fatal("alloc not mapped")
		}
		m.TID = op.StartTID
		r.RecordMemory(&m)
		mems = append(mems, m)
		mk := OpMarkRecord{TimeNS: r.Now(), Category: MarkEnqueueStart, CorrelationID: uint64(i), TID: 7, PID: 7, Name: op.Name}
		r.RecordMark(&mk)
		marks = append(marks, mk)
		mk.Category, mk.TimeNS = MarkEnqueueEnd, r.Now()
		r.RecordMark(&mk)
		marks = append(marks, mk)
		op.EndNS = r.Now()
		r.RecordOp(&op)
		ops = append(ops, op)
	}
	// a free placed by epoch time (as the allocator tracker reports it)
	var e snapshot.TraceEntry
	e.Action, e.Addr, e.Size, e.TimeUS = snapshot.ActionFreeCompleted, 0x1000, 512, (clk.Raw()+fakeDiff)/1000
	m, _ := r.MemoryRecordFromTrace(0, &e, allocated-512, 1<<30, allocated-512)
	r.RecordMemory(&m)
	mems = append(mems, m)
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if r.Dropped() != 0 {
		t.Fatalf("dropped %d", r.Dropped())
	}
	cyc := r.Dirs()[0]
	// file modes as torch_npu's
	for p, mode := range map[string]os.FileMode{cyc: 0o750, filepath.Join(cyc, FrameworkDir): 0o750,
		filepath.Join(cyc, FrameworkDir, FileOpRange): 0o640, filepath.Join(cyc, FrameworkDir, FileMemory): 0o640} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", p, st.Mode().Perm(), mode, err)
		}
	}

	// 1. raw records
	recs := readAll(t, cyc)
	if !reflect.DeepEqual(recs.OpRanges, ops) || !reflect.DeepEqual(recs.OpMarks, marks) || !reflect.DeepEqual(recs.Memory, mems) {
		t.Fatalf("FRAMEWORK records differ: %d/%d ops, %d/%d marks, %d/%d mem",
			len(recs.OpRanges), len(ops), len(recs.OpMarks), len(marks), len(recs.Memory), len(mems))
	}
	if got := mems[len(mems)-1].TimeNS + fakeDiff; got != e.TimeUS*1000 {
		t.Fatalf("epoch-placed free: raw %d → epoch %d, want %d", mems[len(mems)-1].TimeNS, got, e.TimeUS*1000)
	}

	// 2. raw directory reader vs 3. analysed output reader
	raw, err := readFramework(context.Background(), cyc)
	if err != nil {
		t.Fatal(err)
	}
	an, err := ReadDir(cyc)
	if err != nil {
		t.Fatal(err)
	}
	if an.Source != SourceAnalysed || !an.Complete || raw.Source != SourceFramework || !raw.Complete {
		t.Fatalf("sources %s/%v %s/%v", an.Source, an.Complete, raw.Source, raw.Complete)
	}
	if len(raw.Ops) != len(ops) || len(an.Ops) != len(ops) {
		t.Fatalf("ops: raw %d analysed %d want %d", len(raw.Ops), len(an.Ops), len(ops))
	}
	for i := range raw.Ops {
		a, b := raw.Ops[i], an.Ops[i]
		a.Scope, a.Async = 0, false // not carried by trace_view.json
		if a != b {
			t.Fatalf("op %d:\n raw      %+v\n analysed %+v", i, a, b)
		}
	}
	for i := range ops {
		var found bool
		for _, o := range raw.Ops {
			if o.Seq == ops[i].Seq {
				found = o.StartNS == ops[i].StartNS+fakeDiff && o.EndNS == ops[i].EndNS+fakeDiff && o.Name == ops[i].Name
			}
		}
		if !found {
			t.Fatalf("op seq %d not read back with epoch times", ops[i].Seq)
		}
	}
	if len(raw.Memory) != len(mems) || len(an.Memory) != len(mems) {
		t.Fatalf("memory: raw %d analysed %d want %d", len(raw.Memory), len(an.Memory), len(mems))
	}
	for i := range raw.Memory {
		a, b := raw.Memory[i], an.Memory[i]
		if a.TimeNS != b.TimeNS || a.Allocated != b.Allocated || a.Reserved != b.Reserved || a.Active != b.Active ||
			a.Device != b.Device || a.Stream != b.Stream || a.Component != b.Component || !b.HasActive {
			t.Fatalf("memory %d:\n raw      %+v\n analysed %+v", i, a, b)
		}
	}
	if len(raw.Queue) != len(ops) || len(an.Queue) != len(ops) {
		t.Fatalf("queue ranges: raw %d analysed %d", len(raw.Queue), len(an.Queue))
	}
	if len(an.OpMemory) != len(ops) || an.OpMemory[0].Name != "aten::op0" || an.OpMemory[0].Size != 512 ||
		an.OpMemory[0].ActiveReleaseNS != raw.Memory[len(raw.Memory)-1].TimeNS {
		t.Fatalf("operator_memory: %d rows, first %+v", len(an.OpMemory), an.OpMemory[0])
	}
}

// TestRecorderOutputPythonDecode cross-checks the Recorder's FRAMEWORK files
// with an independent Python decoder using torch_npu's struct layouts, and
// checks trace_view.json is valid JSON with torch_npu's ts strings.
func TestRecorderOutputPythonDecode(t *testing.T) {
	py := fixture.Tool(t, "python3", "python3")
	dir := t.TempDir()
	r, _ := New(Config{Dir: dir, Clock: newFakeClock(), ProfileMemory: true, PID: 9, TID: 9, Schedule: &Schedule{Active: 2}})
	r.Start()
	for i := 0; i < 3; i++ {
		op := OpRangeRecord{StartNS: r.Now(), Seq: int64(i), PID: 9, StartTID: 9, EndTID: 9, Name: "aten::é", InputShapes: "1,2;3", Stack: "x.py(1): f"}
		op.EndNS = r.Now()
		r.RecordOp(&op)
		m := MemoryUsageRecord{Ptr: 4096, TimeNS: r.Now(), AllocSize: -512, TotalAllocated: 1 << 40, TotalReserved: 1 << 41,
			TotalActive: 7, StreamPtr: -1, DeviceType: DeviceTypeNPU, DeviceIndex: 3, DataType: MemoryBlockFree, TID: 9, PID: 9}
		r.RecordMemory(&m)
		mk := OpMarkRecord{TimeNS: r.Now(), Category: MarkDequeueEnd, CorrelationID: 77, TID: 10, PID: 9, Name: "MatMul"}
		r.RecordMark(&mk)
		r.Step()
	}
	r.Stop()
	cyc := r.Dirs()[0]
	out, err := exec.Command(py, "testdata/check_framework.py", filepath.Join(cyc, FrameworkDir)).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string][]map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	ops, mems, marks := got[FileOpRange], got[FileMemory], got[FileOpMark]
	// cycle 1 = steps 0,1 (active 2): 2 ops + 2 ProfilerStep markers
	if len(ops) != 4 || len(mems) != 2 || len(marks) != 2 {
		t.Fatalf("python decoded %d ops %d mem %d marks", len(ops), len(mems), len(marks))
	}
	if ops[0]["f2"] != "aten::é" || ops[0]["f4"] != "1,2;3" || ops[0]["f8"] != "x.py(1): f" || ops[1]["f2"] != "ProfilerStep#0" || ops[1]["scope"] != 7.0 {
		t.Fatalf("python op %v / %v", ops[0], ops[1])
	}
	if m := mems[1]; m["alloc_size"] != -512.0 || m["allocated"] != float64(1<<40) || m["device_index"] != 3.0 || m["data_type"] != 2.0 || m["stream"] != -1.0 {
		t.Fatalf("python memory %v", m)
	}
	if mk := marks[0]; mk["category"] != 3.0 || mk["corr"] != 77.0 || mk["f1"] != "MatMul" {
		t.Fatalf("python mark %v", mk)
	}
	b, err := os.ReadFile(filepath.Join(cyc, OutputDir, "trace_view.json"))
	if err != nil {
		t.Fatal(err)
	}
	var events []map[string]any
	if err := json.Unmarshal(b, &events); err != nil {
		t.Fatalf("trace_view.json is not valid JSON: %v", err)
	}
	tsRe := regexp.MustCompile(`^\d{16,}\.\d{3}$`)
	var slices int
	for _, e := range events {
		if e["ph"] == "X" {
			slices++
			if ts, ok := e["ts"].(string); !ok || !tsRe.MatchString(ts) {
				t.Fatalf("ts %v is not an epoch-µs string with 3 decimals", e["ts"])
			}
		}
	}
	if slices != 4 {
		t.Fatalf("%d X events", slices)
	}
}
