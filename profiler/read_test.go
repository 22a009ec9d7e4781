package profiler

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

const genDir = "testdata/framework/gen_4242_20261129120000123_ascend_pt"
const syscntDir = "testdata/framework/syscnt_4242_20261129120000456_ascend_pt"
const cannDir = "testdata/framework/cann_4242_20261129120000789_ascend_pt"

func fixtures(t testing.TB) string { return fixture.Path(t, "ascend_profiler") }

// expected is what gen_framework.py (the independent producer) wrote.
type expected struct {
	OpRange []struct {
		Start, End, Seq int64
		PID             uint64 `json:"pid"`
		StartTID        uint64 `json:"start_tid"`
		EndTID          uint64 `json:"end_tid"`
		FwdTID          uint64 `json:"fwd_tid"`
		Scope           uint8
		Async           bool
		Name            string
		InputDtypes     string `json:"input_dtypes"`
		InputShapes     string `json:"input_shapes"`
		Stack, Module   string
		ExtraArgs       string `json:"extra_args"`
		EpochStart      int64  `json:"epoch_start"`
		EpochEnd        int64  `json:"epoch_end"`
	} `json:"op_range"`
	OpMark []struct {
		Time                     int64
		Category, Corr, TID, PID uint64
		Name                     string
		Epoch                    int64
	} `json:"op_mark"`
	Memory []struct {
		Ptr, Time                           int64
		AllocSize                           int64 `json:"alloc_size"`
		Allocated, Reserved, Active, Stream int64
		DeviceType                          int8 `json:"device_type"`
		DeviceIndex                         int8 `json:"device_index"`
		Component                           uint8
		DataType                            uint8 `json:"data_type"`
		AllocatorType                       uint8 `json:"allocator_type"`
		TID, PID                            uint64
		Epoch                               int64
	} `json:"memory_usage"`
	GC     []struct{ PID, Start, End uint64 } `json:"gc_record"`
	PyFunc []struct {
		Time, TID, PID, Key uint64
		Tag                 uint8
	} `json:"python_tracer_func"`
	PyHash []struct {
		Key   uint64
		Value string
	} `json:"python_tracer_hash"`
	Param []struct {
		Key    uint64
		Module string
	} `json:"param_tensor_info"`
	Skipped int
}

func loadExpected(t *testing.T, dir string) *expected {
	t.Helper()
	b, err := os.ReadFile(dir + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

func readAll(t *testing.T, dir string) *Records {
	t.Helper()
	var recs Records
	ents, err := os.ReadDir(filepath.Join(dir, FrameworkDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := ReadFrameworkFile(filepath.Join(dir, FrameworkDir, e.Name()), &recs); err != nil {
			t.Fatal(err)
		}
	}
	return &recs
}

// TestDecodePythonProducedFramework checks every record of every FRAMEWORK
// file against what the Python producer packed.
func TestDecodePythonProducedFramework(t *testing.T) {
	e := loadExpected(t, genDir)
	r := readAll(t, genDir)
	if len(r.OpRanges) != len(e.OpRange) || r.SkippedRecs != e.Skipped {
		t.Fatalf("op_range: %d records (skipped %d), want %d (skipped %d)", len(r.OpRanges), r.SkippedRecs, len(e.OpRange), e.Skipped)
	}
	for i, w := range e.OpRange {
		g := r.OpRanges[i]
		want := OpRangeRecord{StartNS: w.Start, EndNS: w.End, Seq: w.Seq, PID: w.PID, StartTID: w.StartTID,
			EndTID: w.EndTID, FwdTID: w.FwdTID, Scope: w.Scope, Async: w.Async, Name: w.Name,
			InputDtypes: w.InputDtypes, InputShapes: w.InputShapes, Stack: w.Stack, Module: w.Module, ExtraArgs: w.ExtraArgs}
		if g != want {
			t.Fatalf("op_range[%d]:\n got %+v\nwant %+v", i, g, want)
		}
	}
	if len(r.OpMarks) != len(e.OpMark) {
		t.Fatalf("op_mark: %d, want %d", len(r.OpMarks), len(e.OpMark))
	}
	for i, w := range e.OpMark {
		want := OpMarkRecord{TimeNS: w.Time, Category: w.Category, CorrelationID: w.Corr, TID: w.TID, PID: w.PID, Name: w.Name}
		if r.OpMarks[i] != want {
			t.Fatalf("op_mark[%d]: got %+v want %+v", i, r.OpMarks[i], want)
		}
	}
	if len(r.Memory) != len(e.Memory) {
		t.Fatalf("memory: %d, want %d", len(r.Memory), len(e.Memory))
	}
	for i, w := range e.Memory {
		want := MemoryUsageRecord{Ptr: w.Ptr, TimeNS: w.Time, AllocSize: w.AllocSize, TotalAllocated: w.Allocated,
			TotalReserved: w.Reserved, TotalActive: w.Active, StreamPtr: w.Stream, DeviceType: w.DeviceType,
			DeviceIndex: w.DeviceIndex, Component: w.Component, DataType: w.DataType, AllocatorType: w.AllocatorType,
			TID: w.TID, PID: w.PID}
		if r.Memory[i] != want {
			t.Fatalf("memory[%d]: got %+v want %+v", i, r.Memory[i], want)
		}
	}
	if len(r.GC) != len(e.GC) || r.GC[1] != (GCRecord{e.GC[1].PID, e.GC[1].Start, e.GC[1].End}) {
		t.Fatalf("gc: %+v want %+v", r.GC, e.GC)
	}
	if len(r.PyFuncs) != 2 || r.PyFuncs[1] != (PythonTracerFuncRecord{e.PyFunc[1].Time, e.PyFunc[1].TID, e.PyFunc[1].PID, e.PyFunc[1].Key, e.PyFunc[1].Tag}) {
		t.Fatalf("python_tracer_func: %+v", r.PyFuncs)
	}
	if len(r.PyHashes) != 2 || r.PyHashes[0].Value != e.PyHash[0].Value || r.PyHashes[1].Value != "N/A" {
		t.Fatalf("python_tracer_hash: %+v", r.PyHashes)
	}
	if len(r.Params) != 1 || r.Params[0].ModuleParam != e.Param[0].Module || r.Params[0].Key != e.Param[0].Key {
		t.Fatalf("param_tensor_info: %+v", r.Params)
	}
}

// TestReadDirEpochTimes checks ReadDir's epoch conversion against the
// producer's torch_npu formula, for monotonic and system-counter clocks and
// with CANN PROF_*/host files overriding profiler_info's start_info.
func TestReadDirEpochTimes(t *testing.T) {
	for _, dir := range []string{genDir, syscntDir, cannDir} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			e := loadExpected(t, dir)
			d, err := ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if d.Source != SourceFramework || !d.Complete {
				t.Fatalf("source %q complete %v", d.Source, d.Complete)
			}
			type span struct {
				name       string
				start, end int64
			}
			var want, got []span
			for _, o := range e.OpRange {
				want = append(want, span{o.Name, o.EpochStart, o.EpochEnd})
			}
			for _, o := range d.Ops {
				got = append(got, span{o.Name, o.StartNS, o.EndNS})
			}
			sortSpans := func(s []span) {
				sort.Slice(s, func(i, j int) bool {
					if s[i].start != s[j].start {
						return s[i].start < s[j].start
					}
					return s[i].name < s[j].name
				})
			}
			sortSpans(want)
			sortSpans(got)
			if len(got) != len(want) {
				t.Fatalf("%d ops, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("op %d: got %+v want %+v", i, got[i], want[i])
				}
			}
			var npu int
			for _, m := range e.Memory {
				if m.DeviceType == DeviceTypeNPU {
					npu++
				}
			}
			if len(d.Memory) != npu {
				t.Fatalf("%d NPU memory records, want %d", len(d.Memory), npu)
			}
			for _, m := range d.Memory {
				found := false
				for _, w := range e.Memory {
					if uint64(w.Ptr) == m.Ptr && w.Epoch == m.TimeNS && w.AllocSize == m.AllocSize {
						found = true
					}
				}
				if !found {
					t.Fatalf("memory record %+v not produced", m)
				}
			}
			if len(d.Steps) != 3 || d.Steps[0].ID != 1 || d.Steps[2].ID != 3 {
				t.Fatalf("steps %+v", d.Steps)
			}
			for _, o := range d.Ops {
				if strings.HasPrefix(o.Name, "aten::") && o.Step < 1 {
					t.Fatalf("op %s at %d has no step", o.Name, o.StartNS)
				}
			}
			if len(d.Queue) != 2*len(e.OpMark)/4 {
				t.Fatalf("%d queue ranges, want %d", len(d.Queue), len(e.OpMark)/2)
			}
			if len(d.Warnings) == 0 {
				t.Fatal("the skipped short record should be reported")
			}
		})
	}
}

// TestRealFixturesParse reads every real analysed fixture directory and file.
func TestRealFixturesParse(t *testing.T) {
	for _, rank := range []string{"msinsight_rank0", "msinsight_rank1"} {
		d, err := ReadDir(filepath.Join(fixtures(t), rank))
		if err != nil {
			t.Fatal(err)
		}
		if rank == "msinsight_rank0" && (len(d.ModuleMemory) == 0 || d.ModuleMemory[0].Component != "SLOG") {
			t.Fatalf("npu_module_mem: %d rows", len(d.ModuleMemory))
		}
		if d.Source != SourceAnalysed || len(d.Ops) == 0 || len(d.Memory) == 0 || len(d.Kernels) == 0 || len(d.OpMemory) == 0 {
			t.Fatalf("%s: %s ops %d mem %d kernels %d opmem %d", rank, d.Source, len(d.Ops), len(d.Memory), len(d.Kernels), len(d.OpMemory))
		}
		st, err := ReadStepTraceTimeCSV(filepath.Join(fixtures(t), rank, OutputDir, "step_trace_time.csv"))
		if err != nil || len(st) != 1 || st[0].Step != 2 {
			t.Fatalf("%s step_trace_time: %+v %v", rank, st, err)
		}
		if _, err := ReadProfilerInfo(filepath.Join(fixtures(t), rank, "profiler_info_"+rank[len(rank)-1:]+".json")); err != nil {
			t.Fatal(err)
		}
	}
	k, err := ReadKernelDetailsCSV(filepath.Join(fixtures(t), "mstt", "kernel_details.csv"))
	if err != nil || len(k) == 0 {
		t.Fatalf("mstt kernel_details: %d %v", len(k), err)
	}
	d, err := ReadDir(filepath.Join(fixtures(t), "mstt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Ops) != 711 || len(d.Queue) != 296 {
		t.Fatalf("mstt trace_view: %d cpu_op (want 711), %d queue ranges (want 296)", len(d.Ops), len(d.Queue))
	}
	if d.Ops[0].Name != "ProfilerStep#1" || !d.Ops[0].IsStep || len(d.Steps) == 0 {
		t.Fatalf("mstt: first op %+v, steps %+v", d.Ops[0], d.Steps)
	}
	first := d.Ops[1]
	if first.Step != 1 || first.Name != "aten::empty" || first.StartNS != 1704161511420306491 || first.DurNS != 13080 {
		t.Fatalf("first op %+v", first)
	}
}

// TestLiveTimeBase: without info files the raw clock kind is told by magnitude
// (docs/reference/profiler-format.md §3.4).
func TestLiveTimeBase(t *testing.T) {
	_, mono := clockPair()
	tb := LiveTimeBase(t.TempDir(), mono-1e9)
	if tb.SyscntEnable || !tb.Approximate {
		t.Fatalf("monotonic sample read as %+v", tb)
	}
	if got, want := tb.EpochNS(mono), time.Now().UnixNano(); got < want-int64(time.Second) || got > want+int64(time.Second) {
		t.Fatalf("epoch %d, now %d", got, want)
	}
	tb = LiveTimeBase(t.TempDir(), mono/20) // a 50 MHz counter
	if !tb.SyscntEnable || tb.FreqMHz < 49 || tb.FreqMHz > 51 {
		t.Fatalf("counter sample read as %+v", tb)
	}
	if got, want := tb.EpochNS(mono/20), time.Now().UnixNano(); got < want-int64(time.Second) || got > want+int64(time.Second) {
		t.Fatalf("counter epoch %d, now %d", got, want)
	}
	tb = LiveTimeBase(cannDir, mono/20) // frequency from PROF_*/host/info.json
	if !tb.SyscntEnable || tb.FreqMHz != 25 {
		t.Fatalf("host freq: %+v", tb)
	}
}

// TestOpMemDeltas: the producer allocates (i+1)·512 KiB inside each forward
// op and frees everything outside them; a step holds all of it.
func TestOpMemDeltas(t *testing.T) {
	d, err := ReadDir(genDir)
	if err != nil {
		t.Fatal(err)
	}
	deltas := d.OpMemDeltas()
	want := map[string]int64{"aten::empty": 512 << 10, "aten::add": 1024 << 10, "aten::mul": 1536 << 10, "aten::matmul": 2048 << 10, "MulBackward0": 0}
	for i, o := range d.Ops {
		if w, ok := want[o.Name]; ok && deltas[i] != w {
			t.Errorf("%s step %d: delta %d, want %d", o.Name, o.Step, deltas[i], w)
		}
		if o.IsStep && deltas[i] != 0 {
			t.Errorf("%s: delta %d, want 0 (all freed within the step)", o.Name, deltas[i])
		}
	}
	a, err := ReadDir(filepath.Join(fixtures(t), "mstt"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(a.OpMemDeltas()); n != len(a.Ops) {
		t.Fatalf("%d deltas for %d ops", n, len(a.Ops))
	}
}

// TestMemDeltasInBatches: records added in batches, in order or the later
// batches first (records older than those already held), give every op
// the delta of the whole set, for records with sizes (FRAMEWORK) and for
// totals only (CSV).
func TestMemDeltasInBatches(t *testing.T) {
	for _, dir := range []string{genDir, filepath.Join(fixtures(t), "mstt")} {
		d, err := ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := d.OpMemDeltas()
		n := len(d.Memory)
		batches := [][]MemoryRecord{d.Memory[:n/3], d.Memory[n/3 : 2*n/3], d.Memory[2*n/3:]}
		for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}} {
			t.Run(fmt.Sprintf("%s/%v", filepath.Base(dir), order), func(t *testing.T) {
				var m MemDeltas
				for _, b := range order {
					m.Add(batches[b])
				}
				nonzero := 0
				for i := range d.Ops {
					if got := m.Of(&d.Ops[i]); got != want[i] {
						t.Fatalf("op %d %s: %d in batches, %d whole", i, d.Ops[i].Name, got, want[i])
					}
					if want[i] != 0 {
						nonzero++
					}
				}
				if nonzero == 0 && dir == genDir {
					t.Fatal("no op has a delta: the test compares nothing")
				}
			})
		}
	}
}

// TestEveryFixtureFileReads walks every CSV and JSON fixture: CSVs through
// the header-indexed table reader (all rows), JSON through encoding/json.
// The CANN SQLite export (msinsight_msprof_0.db) is out of scope.
func TestEveryFixtureFileReads(t *testing.T) {
	n := 0
	err := filepath.WalkDir(fixtures(t), func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		switch filepath.Ext(p) {
		case ".csv":
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			tb, err := newCSVTable(f, p)
			if err != nil {
				return err
			}
			rows := 0
			for {
				_, err := tb.next()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				rows++
			}
			if rows == 0 || len(tb.cols) < 3 {
				return fmt.Errorf("%s: %d rows, %d columns", p, rows, len(tb.cols))
			}
		case ".json":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		default:
			return nil
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("only %d fixture files found", n)
	}
}

// TestAnalysedDirKeepsRawMemory: an analysed directory that still has
// FRAMEWORK/torch.memory_usage (torch_npu keeps it) takes its PTA and
// WORKSPACE memory rows from there — every raw record, with pointer and
// size — and the CANN components from memory_record.csv (a real one here).
func TestAnalysedDirKeepsRawMemory(t *testing.T) {
	root := filepath.Join(t.TempDir(), "gen_4242_20261129120000123_ascend_pt")
	if err := os.CopyFS(root, os.DirFS(genDir)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(root, OutputDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(filepath.Join(fixtures(t), "msinsight_rank0", OutputDir, "memory_record.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"memory_record.csv": csv, AnalyseDone: nil} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if d.Source != SourceAnalysed {
		t.Fatalf("source %v, want analysed", d.Source)
	}
	e := loadExpected(t, genDir)
	var raw, cann int
	ptrs := map[uint64]bool{}
	for _, w := range e.Memory {
		if w.DeviceType == DeviceTypeNPU {
			raw++
			ptrs[uint64(w.Ptr)] = true
		}
	}
	for i, m := range d.Memory {
		if i > 0 && m.TimeNS < d.Memory[i-1].TimeNS {
			t.Fatalf("memory[%d] out of time order", i)
		}
		switch m.Component {
		case CompPTA, CompWorkspace:
			if !ptrs[m.Ptr] || m.Kind == MemoryInvalid {
				t.Fatalf("memory[%d] %+v is not a raw record", i, m)
			}
			raw--
		default:
			cann++
		}
	}
	// the fixture's CSV: 2 APP, 3 GE, 3 PTA+GE rows (its 3 PTA rows are replaced)
	if raw != 0 || cann != 8 {
		t.Fatalf("%d raw records unaccounted for, %d CANN rows (want 0, 8)", raw, cann)
	}
}
