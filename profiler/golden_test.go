package profiler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/safefile"
	"github.com/npumon/npumon/internal/testutil/golden"
)

// goldenView is what the golden files pin: the stats plus the first ops,
// memory records and kernels exactly as read.
type goldenView struct {
	Stats    Stats
	Source   string
	Complete bool
	Steps    []Step
	Ops      []string
	Memory   []string
	Kernels  []string
	OpMemory []string
	Modules  []string
	Warnings int
}

func viewOf(name string, d *Data) goldenView {
	v := goldenView{Stats: ComputeStats(name, d), Source: d.Source, Complete: d.Complete, Steps: d.Steps, Warnings: len(d.Warnings)}
	for i := range d.Ops[:min(8, len(d.Ops))] {
		o := &d.Ops[i]
		v.Ops = append(v.Ops, fmt.Sprintf("%s start=%d end=%d dur=%d tid=%d seq=%d step=%d fwd=%d shapes=%q",
			o.Name, o.StartNS, o.EndNS, o.DurNS, o.TID, o.Seq, o.Step, o.FwdTID, o.InputShapes))
	}
	for i := range d.Memory[:min(8, len(d.Memory))] {
		m := &d.Memory[i]
		v.Memory = append(v.Memory, fmt.Sprintf("%s t=%d dev=%d ptr=%#x size=%d kind=%d alloc=%d(%v) res=%d act=%d(%v) stream=%d",
			m.Component, m.TimeNS, m.Device, m.Ptr, m.AllocSize, m.Kind, m.Allocated, m.HasAllocated, m.Reserved, m.Active, m.HasActive, m.Stream))
	}
	for i := range d.Kernels[:min(5, len(d.Kernels))] {
		k := &d.Kernels[i]
		v.Kernels = append(v.Kernels, fmt.Sprintf("%s %s %s start=%d dur=%d step=%d dev=%d", k.Name, k.Type, k.Core, k.StartNS, k.DurNS, k.Step, k.Device))
	}
	for i := range d.OpMemory[:min(5, len(d.OpMemory))] {
		o := &d.OpMemory[i]
		v.OpMemory = append(v.OpMemory, fmt.Sprintf("%+v", *o))
	}
	for i := range d.ModuleMemory[:min(4, len(d.ModuleMemory))] {
		m := &d.ModuleMemory[i]
		v.Modules = append(v.Modules, fmt.Sprintf("%s t=%d dev=%d res=%d", m.Component, m.TimeNS, m.Device, m.Reserved))
	}
	return v
}

// TestGolden reads every real fixture directory and the Python-produced ones
// and compares a stable view with testdata/golden (go test -update rewrites).
func TestGolden(t *testing.T) {
	cases := map[string]string{
		"msinsight_rank0":  filepath.Join(fixtures(t), "msinsight_rank0"),
		"msinsight_rank1":  filepath.Join(fixtures(t), "msinsight_rank1", OutputDir),
		"mstt":             filepath.Join(fixtures(t), "mstt"),
		"gen_framework":    genDir,
		"syscnt_framework": syscntDir,
	}
	for name, dir := range cases {
		t.Run(name, func(t *testing.T) {
			d, err := ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(viewOf(name, d), "", " ")
			got = append(got, '\n')
			golden.Check(t, filepath.Join("testdata", "golden", name+".json"), got)
		})
	}
}

// TestBadInputErrors: corrupt input gives one error line naming file and offset/row.
func TestBadInputErrors(t *testing.T) {
	dir := t.TempDir()
	fw := filepath.Join(dir, "x_1_20260101000000000_ascend_pt", FrameworkDir)
	os.MkdirAll(fw, 0o750)
	// a 6-byte header claiming a 4 GiB record, after one good record
	good, _ := os.ReadFile(filepath.Join(genDir, FrameworkDir, FileMemory))
	bad := append(append([]byte{}, good[:83]...), 3, 0, 0xff, 0xff, 0xff, 0xff)
	os.WriteFile(filepath.Join(fw, FileMemory), bad, 0o640)
	_, err := ReadDir(filepath.Dir(fw))
	if err == nil || !strings.Contains(err.Error(), FileMemory+": offset 83: record length") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("framework error %v", err)
	}
	var de *safefile.OffsetError
	if !errors.As(err, &de) || de.File != filepath.Join(fw, FileMemory) || de.Offset != 83 {
		t.Fatalf("framework error %v: OffsetError %+v", err, de)
	}
	// a cancelled read stops with ctx.Err()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadDirContext(ctx, filepath.Dir(fw)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled read: %v", err)
	}
	// op_range whose field overruns its record
	rec := make([]byte, 6+58+6+3)
	rec[0], rec[2] = 1, byte(58+6+3)
	rec[64] = 2
	rec[66] = 200 // field length 200 > 3 bytes left
	os.Remove(filepath.Join(fw, FileMemory))
	os.WriteFile(filepath.Join(fw, FileOpRange), rec, 0o640)
	_, err = ReadDir(filepath.Dir(fw))
	if err == nil || !strings.Contains(err.Error(), FileOpRange+": offset 0: field 2 length 200") {
		t.Fatalf("field error %v", err)
	}

	out := filepath.Join(dir, "a", OutputDir)
	os.MkdirAll(out, 0o750)
	os.WriteFile(filepath.Join(out, "memory_record.csv"),
		[]byte("Component,Timestamp(us),Total Reserved(MB),Device Type\r\nPTA,1.5\t,2.0,NPU:0\r\nPTA,12x,2.0,NPU:0\r\n"), 0o640)
	_, err = ReadDir(out)
	if err == nil || !strings.Contains(err.Error(), `memory_record.csv: row 3: column "Timestamp(us)": bad value "12x"`) {
		t.Fatalf("csv error %v", err)
	}
	os.WriteFile(filepath.Join(out, "memory_record.csv"), []byte("Component,Time\r\nPTA,1\r\n"), 0o640)
	_, err = ReadDir(out)
	if err == nil || !strings.Contains(err.Error(), `missing column "Timestamp(us)"`) {
		t.Fatalf("csv header error %v", err)
	}
	os.Remove(filepath.Join(out, "memory_record.csv"))
	os.WriteFile(filepath.Join(out, "trace_view.json"), []byte(`[{"ph":"X","name":"a","ts":"1.0","dur":1,"cat":"cpu_op"},{"ph":"X","ts":"zz"}]`), 0o640)
	_, err = ReadDir(out)
	if err == nil || !strings.Contains(err.Error(), "trace_view.json: offset ") || !strings.Contains(err.Error(), `bad ts "zz"`) {
		t.Fatalf("trace error %v", err)
	}
	// a trace cut before its closing bracket keeps the events before the cut
	os.WriteFile(filepath.Join(out, "trace_view.json"), []byte(`[{"ph":"X","name":"a","ts":"1.0","dur":1,"cat":"cpu_op"},{"ph":"X","na`), 0o640)
	d, err := ReadDir(out)
	if err != nil || len(d.Ops) != 1 || len(d.Warnings) != 1 {
		t.Fatalf("truncated trace: %v %+v", err, d)
	}
	if _, err := ReadDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing dir read")
	}
	if _, err := ReadDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a profiler directory") {
		t.Fatalf("empty dir: %v", err)
	}
}
