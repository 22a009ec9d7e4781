package classify

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPID(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  int
		ok   bool
	}{
		{"oom_snapshot_4127_20261201222822.pickle", 4127, true},
		{"snapshot_7526_step000039.pickle", 7526, true},
		{"vm_7526_20261201222822370_ascend_pt", 7526, true},
		{"/a/b/node-3_99_20261201222822370_ascend_pt/", 99, true},
		{"worker_3_12345_20261201222822370_ascend_pt", 12345, true},
		{"npu-2.6-msinsight-snapshot_1768383987920985470.pkl", 0, false}, // a ns timestamp
		{"msinsight_rank1", 0, false},
		{"snapshot_rank_2.json", 0, false}, // a rank
		{"trainer_20261201222822370_ascend_pt", 0, false},
		{"mem_9999999_x.pickle", 0, false}, // above PID_MAX_LIMIT
		{"dump_snapshot.pickle", 0, false},
	} {
		pid, ok := PID(tc.name)
		if pid != tc.pid || ok != tc.ok {
			t.Errorf("PID(%q) = %d, %v; want %d, %v", tc.name, pid, ok, tc.pid, tc.ok)
		}
	}
}

// pickle2 is a protocol-2 pickle of an empty dict, as Python writes it:
// enough for the classifier, which reads a file's first bytes.
var pickle2 = []byte("\x80\x02}q\x00.")

// jobDir writes a dump directory: files (name → content) and profiler runs
// (a FRAMEWORK/ each), with modification times in the order given.
func jobDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i, n := range names {
		p := filepath.Join(dir, n)
		switch {
		case strings.HasSuffix(n, "_ascend_pt"):
			if err := os.MkdirAll(filepath.Join(p, "FRAMEWORK"), 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(n, ".json"):
			os.WriteFile(p, []byte(`{"lr": 0.1}`), 0o644) // a job's config, not a snapshot
		default:
			os.WriteFile(p, pickle2, 0o644)
		}
		mt := base.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func bases(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = filepath.Base(p)
	}
	return out
}

func TestResolveJob(t *testing.T) {
	dir := jobDir(t,
		"h_41_20261201100000000_ascend_pt", // another process (an earlier run of the job)
		"snapshot_41_step000009.pickle",
		"h_77_20261201110000000_ascend_pt",
		"snapshot_77_step000009.pickle",
		"h_77_20261201110100000_ascend_pt",
		"snapshot_77_step000019.pickle",
		"config.json",
		"h_77_20261201110200000_ascend_pt",
	)
	// a FIFO named like a snapshot: never opened for reading, so never
	// blocking
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.pickle"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Path(dir)
	if err != nil || !IsJobDir(in) {
		t.Fatalf("IsJobDir(%v) false (%v)", in, err)
	}
	j, err := ResolveJob(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(j.Snapshot) != "snapshot_77_step000019.pickle" || j.PID != 77 || j.Open() != j.Snapshot {
		t.Errorf("snapshot %s pid %d", j.Snapshot, j.PID)
	}
	want := []string{"h_77_20261201110000000_ascend_pt", "h_77_20261201110100000_ascend_pt", "h_77_20261201110200000_ascend_pt"}
	if got := bases(j.Runs); !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	if !strings.Contains(j.Why, "1 of 4 profiler runs are of other processes") {
		t.Errorf("why %q", j.Why)
	}
	if got := bases(j.Snapshots); !slices.Equal(got, []string{"snapshot_41_step000009.pickle", "snapshot_77_step000009.pickle", "snapshot_77_step000019.pickle"}) {
		t.Errorf("snapshots %v (config.json is no snapshot)", got)
	}
	if len(j.AllRuns) != 4 {
		t.Errorf("all runs %v", j.AllRuns)
	}
	if got := bases(Beside(j.Snapshots[0])); !slices.Equal(got, []string{"h_41_20261201100000000_ascend_pt"}) {
		t.Errorf("beside %v", got)
	}

	// --profiler DIR: the runs of the snapshot's process; pid unknown and
	// two processes: refused, naming them.
	if runs, err := RunsOf(dir, 77); err != nil || !slices.Equal(bases(runs), want) {
		t.Errorf("RunsOf(77) = %v, %v", runs, err)
	}
	if _, err := RunsOf(dir, 0); err == nil || !strings.Contains(err.Error(), "pids 41, 77") {
		t.Errorf("RunsOf(0) err %v", err)
	}
	if _, err := RunsOf(dir, 5); err == nil || !strings.Contains(err.Error(), "no profiler run of process 5") {
		t.Errorf("RunsOf(5) err %v", err)
	}
	run := filepath.Join(dir, want[0])
	if runs, err := RunsOf(run, 5); err != nil || !slices.Equal(runs, []string{run}) {
		t.Errorf("RunsOf(run) = %v, %v", runs, err)
	}
	if _, err := RunsOf(filepath.Join(dir, "config.json"), 5); err == nil || !strings.Contains(err.Error(), "not profiler output") {
		t.Errorf("RunsOf(config) err %v", err)
	}
}

func TestResolveJobRunsOnly(t *testing.T) {
	dir := jobDir(t, "trainer_20261201100000000_ascend_pt", "trainer_20261201110000000_ascend_pt")
	j, err := ResolveJob(dir)
	if err != nil {
		t.Fatal(err)
	}
	if j.Snapshot != "" || !slices.Equal(bases(j.Runs), []string{"trainer_20261201110000000_ascend_pt"}) || j.Open() != j.Runs[0] {
		t.Errorf("%+v", j)
	}
	// no name carries a pid: all runs are the process's
	if runs, err := RunsOf(dir, 0); err != nil || len(runs) != 2 {
		t.Errorf("RunsOf = %v, %v", runs, err)
	}
	if _, err := ResolveJob(t.TempDir()); err == nil {
		t.Error("an empty directory resolved")
	}
	plain := jobDir(t, "config.json")
	if in, _ := Path(plain); IsJobDir(in) {
		t.Error("a directory of a config file is a job directory")
	}
}

// TestResolveJobSymlink: a symlink to a snapshot file elsewhere is the
// directory's snapshot.
func TestResolveJobSymlink(t *testing.T) {
	src := filepath.Join(jobDir(t, "elsewhere.pickle"), "elsewhere.pickle")
	dir := t.TempDir()
	if err := os.Symlink(src, filepath.Join(dir, "snapshot_5_step000001.pickle")); err != nil {
		t.Fatal(err)
	}
	j, err := ResolveJob(dir)
	if err != nil || filepath.Base(j.Snapshot) != "snapshot_5_step000001.pickle" || j.PID != 5 {
		t.Fatalf("%+v, %v", j, err)
	}
}
