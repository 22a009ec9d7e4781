package memusage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFixtures(t *testing.T) {
	f, err := Read("testdata/device_0_memUsageInfo_20261201103016.csv")
	if err != nil {
		t.Fatal(err)
	}
	if f.Device != 0 || !f.Stamp.Equal(time.Date(2026, 12, 1, 10, 30, 16, 0, time.UTC)) {
		t.Errorf("device %d stamp %v", f.Device, f.Stamp)
	}
	want := []Module{{"HCCL", 1228 * MiB, 1536 * MiB}, {"RUNTIME", 310 * MiB, 342 * MiB}, {"AICPU", 64 * MiB, 64 * MiB}, {"DVPP", 0, 0}}
	if len(f.Modules) != len(want) {
		t.Fatalf("modules %+v", f.Modules)
	}
	for i := range want {
		if f.Modules[i] != want[i] {
			t.Errorf("module %d = %+v, want %+v", i, f.Modules[i], want[i])
		}
	}
	if f.Total() != (1228+310+64)*MiB {
		t.Errorf("total %d", f.Total())
	}
	mib := func(n int64) string { return fmt.Sprintf("%dM", n/MiB) }
	if s := f.Summary(2, mib); s != "HCCL 1228M, RUNTIME 310M, 1 more" {
		t.Errorf("summary %q", s)
	}

	f, err = Read("testdata/device_1_memUsageInfo_20261201103017.csv")
	if err != nil {
		t.Fatal(err)
	}
	if f.Device != 1 || len(f.Modules) != 2 || f.Modules[0].Cur != 1228*MiB+MiB/2 || f.Modules[0].Peak != 1536*MiB+MiB/4 {
		t.Errorf("decimal, CRLF: %+v", f)
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"bad_negative.csv", `testdata/bad_negative.csv: line 3: curMemSize(MB): "-3" is not a non-negative number of MB`},
		{"bad_header.csv", `testdata/bad_header.csv: line 1: the header is "module,cur,peak", want "moduleName,curMemSize(MB),memPeakSize(MB)"`},
		{"bad_fields.csv", `testdata/bad_fields.csv: line 2: 2 fields, want 3 (moduleName,curMemSize(MB),memPeakSize(MB))`},
	} {
		_, err := Read("testdata/" + tc.file)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.file, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "x.csv: empty: no header line"},
		{"moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,1e3,1\n", `x.csv: line 2: curMemSize(MB): "1e3" is not a non-negative number of MB`},
		{"moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,1,99999999999\n", "x.csv: line 2: memPeakSize(MB): 99999999999 MB is over 1073741824 MB (1 PiB): impossible for a device"},
		{"moduleName,curMemSize(MB),memPeakSize(MB)\n,1,1\n", "x.csv: line 2: moduleName: empty"},
		{"moduleName,curMemSize(MB),memPeakSize(MB)\n\"HCCL,1,1\n", `x.csv: line 2: extraneous or missing " in quoted-field`},
		{"moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,1.2.3,1\n", `x.csv: line 2: curMemSize(MB): "1.2.3" is not a non-negative number of MB`},
	} {
		_, err := Parse("x.csv", []byte(tc.in))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		}
	}
	// a BOM and a header in other case are torch_npu's header still
	f, err := Parse("x.csv", []byte("\xef\xbb\xbfModuleName, curMemSize(MB), memPeakSize(MB)\nHCCL, 2, 3\n"))
	if err != nil || len(f.Modules) != 1 || f.Modules[0].Cur != 2*MiB {
		t.Errorf("BOM: %+v %v", f, err)
	}
}

func TestReadBounded(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "device_0_memUsageInfo_20261201103016.csv")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", MaxFileBytes+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(big); err == nil || !strings.Contains(err.Error(), "over the 1048576-byte limit") {
		t.Errorf("big: %v", err)
	}
	fifo := filepath.Join(dir, "device_1_memUsageInfo_20261201103016.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := Read(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") {
		t.Errorf("fifo: %v", err)
	}
	var sb strings.Builder
	sb.WriteString("moduleName,curMemSize(MB),memPeakSize(MB)\n")
	for range MaxModules + 1 {
		sb.WriteString("M,1,1\n")
	}
	if _, err := Parse("x.csv", []byte(sb.String())); err == nil || !strings.Contains(err.Error(), "more than 4096 modules") {
		t.Errorf("rows: %v", err)
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		dev  int
		ok   bool
	}{
		{"device_0_memUsageInfo_20261201103016.csv", 0, true},
		{"/x/device_15_memUsageInfo_20261201103016.csv", 15, true},
		{"device_0_memUsageInfo_2026120110301.csv", 0, false},  // 13 digits
		{"device_0_memUsageInfo_20261301103016.csv", 0, false}, // month 13
		{"device_x_memUsageInfo_20261201103016.csv", 0, false},
		{"device_0_memUsageInfo_20261201103016.txt", 0, false},
		{"oom_snapshot_7526_20261201103015.pickle", 0, false},
	} {
		d, _, ok := ParseName(tc.name)
		if ok != tc.ok || ok && d != tc.dev {
			t.Errorf("%s: %d %v", tc.name, d, ok)
		}
	}
}

func touch(t *testing.T, dir, name string, mod time.Time) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mod.IsZero() {
		if err := os.Chtimes(p, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// TestBeside: the pairing rule of docs/files.md — same directory, same
// device, nearest stamp within MaxSkew, the later of two as near.
func TestBeside(t *testing.T) {
	dir := t.TempDir()
	snap := touch(t, dir, "oom_snapshot_7526_20261201103015.pickle", time.Time{})
	for _, n := range []string{
		"device_0_memUsageInfo_20261201093015.csv", // an hour before
		"device_0_memUsageInfo_20261201103013.csv", // 2 s before
		"device_0_memUsageInfo_20261201103017.csv", // 2 s after: the later of two as near
		"device_1_memUsageInfo_20261201103015.csv", // another device
		"device_2_memUsageInfo_20261201104515.csv", // 15 min away
	} {
		touch(t, dir, n, time.Time{})
	}
	for _, tc := range []struct {
		dev  int
		want string
	}{
		{0, "device_0_memUsageInfo_20261201103017.csv"},
		{1, "device_1_memUsageInfo_20261201103015.csv"},
		{2, ""},
		{3, ""},
	} {
		p, ok := Beside(snap, tc.dev)
		if filepath.Base(p) != tc.want && !(tc.want == "" && !ok) {
			t.Errorf("device %d: %q %v, want %q", tc.dev, p, ok, tc.want)
		}
	}
	// a name without a stamp pairs by its modification time (local wall clock)
	mod := time.Date(2026, 12, 1, 9, 30, 20, 0, time.Local)
	plain := touch(t, dir, "snapshot.pickle", mod)
	if p, _ := Beside(plain, 0); filepath.Base(p) != "device_0_memUsageInfo_20261201093015.csv" {
		t.Errorf("by mtime: %q", p)
	}
	// another directory's CSV is never taken
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	other := touch(t, sub, "oom_snapshot_7526_20261201093015.pickle", time.Time{})
	if p, ok := Beside(other, 0); ok {
		t.Errorf("paired across directories: %q", p)
	}
	fs, errs := ReadBeside(snap, []int{0, 1, 2})
	if len(fs) != 2 || len(errs) != 0 || fs[0].Device != 0 || fs[1].Device != 1 {
		t.Errorf("ReadBeside: %v %v", fs, errs)
	}
}
