package profiler

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

func fixtureDB(t testing.TB) string { return fixture.Path(t, "ascend_profiler/msinsight_msprof_0.db") }

// TestReadDBMsprofFixture pins what the real CANN msprof export holds: 4
// CANN_API calls and 13 MSTX_EVENTS ranges as ops, 494 NPU_OP_MEM events, and
// the 11 of 24 TASK rows that have COMPUTE_TASK_INFO as kernels.
func TestReadDBMsprofFixture(t *testing.T) {
	d, err := ReadDir(fixtureDB(t))
	if err != nil {
		t.Fatal(err)
	}
	// the export mixes sessions: 15,336 hours of rows, and op names that
	// are other columns' strings (Sanity)
	if d.Source != SourceDB || d.Complete || len(d.Warnings) != 2 || !strings.Contains(d.Warnings[0], "span 15336 hours") ||
		!strings.Contains(d.Warnings[1], "7 of 17 op names are dtype or shape lists or numbers") {
		t.Errorf("source %q complete %v warnings %q", d.Source, d.Complete, d.Warnings)
	}
	if len(d.Ops) != 17 || len(d.Memory) != 494 || len(d.Kernels) != 11 || len(d.Steps) != 0 || len(d.Queue) != 0 {
		t.Fatalf("ops %d memory %d kernels %d steps %d queue %d", len(d.Ops), len(d.Memory), len(d.Kernels), len(d.Steps), len(d.Queue))
	}
	first, last := d.Ops[0], d.Ops[len(d.Ops)-1]
	if first.Name != "aclrtGetDeviceCount" || first.StartNS != 1698220811391886870 || first.EndNS != 1698220811391889430 || first.Seq != -1 {
		t.Errorf("first op %+v", first)
	}
	// MSTX_EVENTS.message is a string id: 57 → "GatherV2"
	if last.Name != "GatherV2" || last.StartNS != 1753431345193618610 || last.EndNS != 1753431345194404710 {
		t.Errorf("last op %+v", last)
	}
	// globalTid = pid<<32 | tid
	if last.PID != 1024172 || last.TID != 1024172 {
		t.Errorf("last op pid/tid %d/%d", last.PID, last.TID)
	}
	names := map[string]int{}
	for _, o := range d.Ops {
		names[o.Name]++
	}
	if names["aclrtMemcpy"] != 2 || names["aclnnEmbedding_GatherV2AiCore_GatherV2"] != 1 {
		t.Errorf("op names %v", names)
	}
	m0 := d.Memory[0]
	want := MemoryRecord{TimeNS: 1710490360222620070, Component: CompAPP, Device: 0, Ptr: 20068255531008, AllocSize: 65536,
		Kind: MemoryMalloc, Allocated: 131072, Reserved: 1229258752, HasAllocated: true, PID: 193417, TID: 197278}
	if m0 != want {
		t.Errorf("memory[0]\n got %+v\nwant %+v", m0, want)
	}
	if m := d.Memory[1]; m.Kind != MemoryFree || m.AllocSize != -65536 || m.Allocated != 65536 {
		t.Errorf("memory[1] %+v", m)
	}
	comps := map[string]int{}
	for _, m := range d.Memory {
		comps[m.Component]++
	}
	if comps[CompAPP] != 492 || comps[CompPTAGE] != 2 {
		t.Errorf("components %v", comps)
	}
	if ml := d.Memory[len(d.Memory)-1]; ml.TimeNS != 1710490361834664800 {
		t.Errorf("last memory time %d", ml.TimeNS)
	}
	k0 := d.Kernels[0]
	wantK := Kernel{Name: "aclnnInplaceZero_ZerosLikeAiCore_ZerosLike", Type: "ZerosLike", Core: "AI_VECTOR_CORE",
		StartNS: 1698220811392354694, DurNS: 612092, Step: -1, Device: 2}
	if k0 != wantK {
		t.Errorf("kernel[0]\n got %+v\nwant %+v", k0, wantK)
	}
	if kl := d.Kernels[10]; kl.Name != "aclnnLtScalar_LessAiCore_Less" || kl.StartNS != 1698220811528240549 || kl.DurNS != 2000 {
		t.Errorf("kernel[10] %+v", kl)
	}
	st := ComputeStats("x", d)
	if *st.FirstTimeUS != 1698220811391886 || *st.LastTimeUS != 1753431345194404 {
		t.Errorf("stats times %d %d", *st.FirstTimeUS, *st.LastTimeUS)
	}
}

// TestReadDBPytorchLayout reads the Python-written torch_npu database back
// exactly (testdata/db/gen.py).
func TestReadDBPytorchLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host_4242_20231114_ascend_pt")
	out := filepath.Join(dir, OutputDir)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, "testdata/db/ascend_pytorch_profiler_0.db", filepath.Join(out, "ascend_pytorch_profiler_0.db"))
	if err := os.WriteFile(filepath.Join(out, AnalyseDone), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, out, filepath.Dir(dir), filepath.Join(out, "ascend_pytorch_profiler_0.db")} {
		if !IsProfilerPath(p) && p != filepath.Dir(dir) {
			t.Errorf("IsProfilerPath(%s) false", p)
		}
		d, err := ReadDir(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		checkPytorchDB(t, d)
	}
}

func checkPytorchDB(t *testing.T, d *Data) {
	t.Helper()
	const t0 = 1700000000000000000
	if d.Source != SourceDB || !d.Complete {
		t.Errorf("source %q complete %v", d.Source, d.Complete)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "table PYTORCH_API: 1 rows without startNs/endNs skipped") {
		t.Errorf("warnings %q", d.Warnings)
	}
	stack := "train.py(10): step;\r\nmodel.py(5): forward"
	want := []Op{
		{Name: "ProfilerStep#1", StartNS: t0, EndNS: t0 + 10000, DurNS: 10000, PID: 4242, TID: 4242, Seq: -1, Step: 1, IsStep: true},
		{Name: "aten::add", StartNS: t0 + 1000, EndNS: t0 + 2000, DurNS: 1000, PID: 4242, TID: 4242, Seq: 17, Step: 1,
			InputDtypes: "float;float;Scalar", InputShapes: "[[2, 3], [2, 3], []]", Stack: stack},
		{Name: "AddBackward0", StartNS: t0 + 3000, EndNS: t0 + 4500, DurNS: 1500, PID: 4242, TID: 4250, FwdTID: 4242, Seq: 17, Step: 1},
		{Name: "mstx_mark_op", StartNS: t0 + 5000, EndNS: t0 + 5000, PID: 4242, TID: 4242, Seq: -1, Step: 1},
		{Name: "ProfilerStep#2", StartNS: t0 + 11000, EndNS: t0 + 20000, DurNS: 9000, PID: 4242, TID: 4242, Seq: -1, Step: 2, IsStep: true},
		{Name: "aten::empty", StartNS: t0 + 12000, EndNS: t0 + 12500, DurNS: 500, PID: 4242, TID: 4242, Seq: 18, Step: 2},
	}
	if !reflect.DeepEqual(d.Ops, want) {
		t.Errorf("ops\n got %+v\nwant %+v", d.Ops, want)
	}
	wantQ := []QueueRange{
		{Name: "Enqueue", StartNS: t0 + 1200, EndNS: t0 + 1300, PID: 4242, TID: 4242, CorrelationID: 7},
		{Name: "aten::add", Dequeue: true, StartNS: t0 + 1500, EndNS: t0 + 1900, PID: 4242, TID: 4243, CorrelationID: 7},
	}
	if !reflect.DeepEqual(d.Queue, wantQ) {
		t.Errorf("queue\n got %+v\nwant %+v", d.Queue, wantQ)
	}
	if wantS := []Step{{1, t0, t0 + 10000}, {2, t0 + 11000, t0 + 20000}}; !reflect.DeepEqual(d.Steps, wantS) {
		t.Errorf("steps %+v", d.Steps)
	}
	const mib = 1 << 20
	wantM := []MemoryRecord{
		{TimeNS: t0 + 1100, Component: CompPTA, Device: 0, Kind: MemoryInvalid, Allocated: 2 * mib, Reserved: 20 * mib, Active: 2 * mib, HasAllocated: true, HasActive: true, Stream: 94000000000},
		{TimeNS: t0 + 1150, Component: CompWorkspace, Device: 0, Kind: MemoryInvalid, Allocated: 512, Reserved: 4 * mib, Active: 512, HasAllocated: true, HasActive: true, Stream: 94000000000},
		{TimeNS: t0 + 3100, Component: CompPTA, Device: 0, Kind: MemoryInvalid, Allocated: 1 * mib, Reserved: 20 * mib, Active: 3 * mib, HasAllocated: true, HasActive: true, Stream: 94000000000},
		{TimeNS: t0 + 12100, Component: CompPTA, Device: 1, Kind: MemoryInvalid, Allocated: 5 * mib, Reserved: 22 * mib, HasAllocated: true},
	}
	if !reflect.DeepEqual(d.Memory, wantM) {
		t.Errorf("memory\n got %+v\nwant %+v", d.Memory, wantM)
	}
	wantOM := []OpMemory{
		{Name: "aten::add", Size: 2 * mib, AllocNS: t0 + 1100, ReleaseNS: t0 + 3100, ActiveReleaseNS: t0 + 3000,
			AllocAllocated: 2 * mib, AllocReserved: 20 * mib, AllocActive: 2 * mib, RelAllocated: 1 * mib, RelReserved: 20 * mib, RelActive: 3 * mib,
			Stream: 94000000000, Device: 0},
		{Name: "aten::empty", Size: 4 * mib, AllocNS: t0 + 12100, AllocAllocated: 5 * mib, AllocReserved: 22 * mib,
			AllocActive: -1, RelAllocated: -1, RelReserved: -1, RelActive: -1, Device: 1},
	}
	if !reflect.DeepEqual(d.OpMemory, wantOM) {
		t.Errorf("op memory\n got %+v\nwant %+v", d.OpMemory, wantOM)
	}
	if wantGC := []GCEvent{{PID: 4242, StartNS: t0 + 6000, EndNS: t0 + 6800}}; !reflect.DeepEqual(d.GC, wantGC) {
		t.Errorf("gc %+v", d.GC)
	}
	if len(d.Kernels) != 0 {
		t.Errorf("kernels %+v", d.Kernels)
	}
}

// TestReadDBTolerates: NULLs, reals and numeric text map to the model;
// values of a wrong type in optional columns read as absent, with a warning.
func TestReadDBTolerates(t *testing.T) {
	d, err := ReadDB("testdata/db/bad_nulls.db")
	if err != nil {
		t.Fatal(err)
	}
	const t0 = 1700000000000000000
	want := []Op{
		{StartNS: t0, EndNS: t0 + 1024, DurNS: 1024, Seq: -1, Step: -1},
		{StartNS: t0 + 2048, EndNS: t0 + 4096, DurNS: 2048, Seq: 7, Step: -1},
	}
	if !reflect.DeepEqual(d.Ops, want) {
		t.Errorf("ops\n got %+v\nwant %+v", d.Ops, want)
	}
	if len(d.Memory) != 1 || d.Memory[0].TimeNS != t0 || d.Memory[0].Allocated != 1 || d.Memory[0].Reserved != 2 || d.Memory[0].HasActive || d.Memory[0].Device != -1 {
		t.Errorf("memory %+v", d.Memory)
	}
	joined := strings.Join(d.Warnings, "\n")
	for _, w := range []string{
		"table MEMORY_RECORD: 1 rows without timestamp skipped",
		`table PYTORCH_API: 1 values of a wrong type read as absent (first: row 2 column globalTid: not an integer: "x")`,
		"2 string ids not in STRING_IDS",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}
}

func TestReadDBBadInput(t *testing.T) {
	tmp := t.TempDir()
	notDB := filepath.Join(tmp, "ascend_pytorch_profiler.db")
	if err := os.WriteFile(notDB, []byte("step,time\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(tmp, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(fixtureDB(t))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(tmp, "truncated.db")
	if err := os.WriteFile(truncated, raw[:len(raw)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	// garbage over every page after the schema page
	smashed := append([]byte(nil), raw...)
	for i := 1024; i < len(smashed); i++ {
		smashed[i] = byte(i*7 + 3)
	}
	corrupt := filepath.Join(tmp, "corrupt.db")
	if err := os.WriteFile(corrupt, smashed, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, want string }{
		{notDB, `ascend_pytorch_profiler.db: not an SQLite database (header "step,time\n1,2\n")`},
		{empty, "empty.db: not an SQLite database: empty file"},
		{truncated, "truncated.db"},
		{corrupt, "corrupt.db"},
		{"testdata/db/bad_types.db", `bad_types.db: table PYTORCH_API row 2: column startNs: not an integer: "12:00:01"`},
		{"testdata/db/bad_notables.db", "bad_notables.db: none of the tables PYTORCH_API, CANN_API"},
		{"testdata/db/bad_nostrings.db", "bad_nostrings.db: no table STRING_IDS"},
		{"testdata/db/bad_view.db", "bad_view.db: none of the tables PYTORCH_API"},
		{"testdata/db/bad_nocolumn.db", "bad_nocolumn.db: table PYTORCH_API has no column startNs"},
		{filepath.Join(tmp, "missing.db"), "missing.db: no such file"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			_, err := ReadDir(c.path)
			if err == nil {
				t.Errorf("%s: no error", c.path)
				return
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("%s: error %q, want one line containing %q", c.path, msg, c.want)
			}
		})
	}
}

// TestReadDirPrefersTextOverDB: with export_type text and db both, the CSV/
// JSON files are read as before; a directory with only the db reads the db.
func TestReadDirPrefersTextOverDB(t *testing.T) {
	out := t.TempDir()
	copyFile(t, "testdata/db/ascend_pytorch_profiler_0.db", filepath.Join(out, "ascend_pytorch_profiler_0.db"))
	d, err := ReadDir(out)
	if err != nil || d.Source != SourceDB {
		t.Fatalf("db only: %v %+v", err, d)
	}
	copyFile(t, filepath.Join(fixtures(t), "msinsight_rank0", OutputDir, "operator_details.csv"), filepath.Join(out, "operator_details.csv"))
	if d, err = ReadDir(out); err != nil || d.Source != SourceAnalysed {
		t.Fatalf("db and csv: %v %+v", err, d)
	}
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkReadDBFixture(b *testing.B) {
	db := fixtureDB(b)
	for b.Loop() {
		if _, err := ReadDB(db); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadDBLeavesDirAlone: reading a finished WAL-mode database (the
// fixture is one) changes neither the file nor its directory — no -wal or
// -shm files appear.
func TestReadDBLeavesDirAlone(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "msprof_0.db")
	copyFile(t, fixtureDB(t), p)
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if before[18] != 2 {
		t.Fatalf("fixture is not in WAL mode (header byte 18 = %d)", before[18])
	}
	if _, err := ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(p)
	ents, _ := os.ReadDir(dir)
	if string(after) != string(before) || len(ents) != 1 {
		t.Errorf("database changed (%v) or files appeared: %v", string(after) != string(before), ents)
	}
}

// TestReadDBWhileWritten: a writer holds an open WAL transaction on the
// database; the reader sees the last committed state, then the new rows once
// they are committed.
func TestReadDBWhileWritten(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ascend_pytorch_profiler_0.db")
	copyFile(t, "testdata/db/ascend_pytorch_profiler_0.db", p)
	w, err := sql.Open("sqlite", "file:"+p+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.SetMaxOpenConns(1)
	tx, err := w.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO PYTORCH_API (startNs, endNs, name, type) VALUES ('1700000000000030000', '1700000000000031000', 268435457, 50001)`); err != nil {
		t.Fatal(err)
	}
	d, err := ReadDB(p)
	if err != nil || len(d.Ops) != 6 {
		t.Fatalf("during the write: %v, %d ops", err, len(d.Ops))
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if d, err = ReadDB(p); err != nil || len(d.Ops) != 7 {
		t.Fatalf("after the commit: %v, %d ops", err, len(d.Ops))
	}
}

// TestDBInt: every SQLite storage class and the driver's Go types convert or
// fail cleanly.
func TestDBInt(t *testing.T) {
	cases := []struct {
		v      any
		want   int64
		ok     bool
		errSub string
	}{
		{nil, 0, false, ""},
		{int64(-5), -5, true, ""},
		{float64(1 << 40), 1 << 40, true, ""},
		{2.5, 0, false, "not an integer: 2.5"},
		{1e300, 0, false, "not an integer"},
		{"1700000000000001024", 1700000000000001024, true, ""},
		{" 42\t", 42, true, ""},
		{"18446744073709551615", -1, true, ""}, // a pointer above 2^63 keeps its bits
		{"1700000000000001024.0", 1700000000000001024, true, ""},
		{"", 0, false, ""},
		{"N/A", 0, false, ""},
		{[]byte("7"), 7, true, ""},
		{[]byte{0xff, 0x00}, 0, false, "not an integer"},
		{true, 1, true, ""},
		{struct{}{}, 0, false, "not an integer: struct {}"},
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			got, ok, err := dbInt(c.v)
			if got != c.want || ok != c.ok || (err == nil) != (c.errSub == "") || (err != nil && !strings.Contains(err.Error(), c.errSub)) {
				t.Errorf("dbInt(%#v) = %d, %v, %v; want %d, %v, %q", c.v, got, ok, err, c.want, c.ok, c.errSub)
			}
		})
	}
}
