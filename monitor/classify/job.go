package classify

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/npumon/npumon/internal/safefile"
	"github.com/npumon/npumon/profiler"
)

// A job's dump directory is where one training job writes its memory
// snapshots (_dump_snapshot pickles, oom_snapshot_<pid>_<YYYYmmddHHMMSS>.pickle)
// and its torch_npu profiler runs ({worker}_{timestamp}_ascend_pt, the
// worker by default {hostname}_{pid}). What npumon opens when pointed at
// one is decided here, once, for every command (docs/files.md, "A job's
// dump directory").

// pidMax is Linux's PID_MAX_LIMIT on 64-bit: no process id exceeds it.
const pidMax = 1 << 22

// PID returns the process id a capture's file or directory name carries:
// the last token of the name (split at '_', extension and the _ascend_pt
// suffix dropped) made of digits only whose value is a possible pid
// (1 … 4194304) — the {pid} of oom_snapshot_{pid}_{YYYYmmddHHMMSS}.pickle,
// of {hostname}_{pid}_{YYYYmmddHHMMSSmmm}_ascend_pt and of
// snapshot_{pid}_step{N}.pickle; timestamps are longer than a pid and never
// taken, nor the N of rank_{N}. ok is false when no token qualifies.
func PID(name string) (pid int, ok bool) {
	name = filepath.Base(filepath.Clean(name))
	name = strings.TrimSuffix(name, "_ascend_pt")
	if ext := filepath.Ext(name); ext != "" && !isDigits(ext[1:]) {
		name = strings.TrimSuffix(name, ext)
	}
	toks := strings.Split(name, "_")
	for i := len(toks) - 1; i >= 0; i-- {
		t := toks[i]
		if len(t) == 0 || len(t) > 7 || !isDigits(t) || i > 0 && strings.EqualFold(toks[i-1], "rank") {
			continue // rank_{N} names a rank (docs/ranks.md), not a process
		}
		if n, err := strconv.Atoi(t); err == nil && n >= 1 && n <= pidMax {
			return n, true
		}
	}
	return 0, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Job is a job's dump directory resolved: the capture npumon opens and the
// profiler runs that go with it.
type Job struct {
	Dir string
	// Snapshot is the newest snapshot file (modification time, then name);
	// "" when the directory holds none.
	Snapshot string
	// PID is Snapshot's process as its name carries it (0: none).
	PID int
	// Runs are the profiler runs of Snapshot's process (RunsOf), by name
	// (= start time); with no snapshot, the newest run alone.
	Runs []string
	// Why says why runs in Dir were left out of Runs ("" when none were).
	Why string
	// Snapshots and AllRuns are every snapshot file and profiler run in
	// Dir, oldest first (modification time, then name): what a capture
	// picker lists.
	Snapshots []string
	AllRuns   []string
}

// Open is the capture a command opens for the directory: Snapshot, else
// the newest run.
func (j Job) Open() string {
	if j.Snapshot != "" || len(j.Runs) == 0 {
		return j.Snapshot
	}
	return j.Runs[0]
}

// IsJobDir reports whether in (a classified directory) is read as a job's
// dump directory by ResolveJob: a directory holding profiler runs, or a
// plain directory holding snapshot files. A profiler run itself is not.
func IsJobDir(in Input) bool {
	if in.Kind == ProfilerParent {
		return true
	}
	if in.Kind != PlainDir {
		return false
	}
	snaps, _ := snapshotsIn(in.Path)
	return len(snaps) > 0
}

// ResolveJob resolves a job's dump directory: its newest snapshot with
// every profiler run of the same process. A directory with no snapshot
// resolves to its newest run (Runs holds it alone). The error is for a
// directory that cannot be read or holds neither.
func ResolveJob(dir string) (Job, error) {
	snaps, err := snapshotsIn(dir)
	if err != nil {
		return Job{}, err
	}
	runs := byMtime(profiler.FindProfilerDirs(dir))
	j := Job{Dir: dir, Snapshots: snaps, AllRuns: runs}
	switch {
	case len(snaps) > 0:
		j.Snapshot = snaps[len(snaps)-1]
		j.PID, _ = PID(j.Snapshot)
		j.Runs, j.Why = runsOf(runs, j.PID)
	case len(runs) > 0:
		j.Runs = runs[len(runs)-1:]
	default:
		return Job{}, fmt.Errorf("%s: no snapshot files and no profiler directories in it", dir)
	}
	if j.Why == "" && len(j.Runs) < len(runs) && j.Snapshot != "" {
		j.Why = fmt.Sprintf("%d of %d profiler runs are of other processes", len(runs)-len(j.Runs), len(runs))
	}
	return j, nil
}

// RunsOf returns the profiler runs path names for the process pid (0: not
// known), as --profiler PATH takes them: a profiler run (a *_ascend_pt
// directory, its ASCEND_PROFILER_OUTPUT or FRAMEWORK, an SQLite export, a
// trace_view.json) is itself; a directory holding runs gives those whose
// name carries pid — every one when no run's name carries a pid, and for
// pid 0 every one when they are all of one process. Runs are sorted by
// name (= start time for one worker). Anything else is an error naming
// the path and why.
func RunsOf(path string, pid int) ([]string, error) {
	in, err := Path(path)
	if err != nil {
		return nil, err
	}
	switch in.Kind {
	case SQLite, TraceView, ProfilerDir:
		return []string{path}, nil
	case ProfilerParent:
		runs, why := runsOf(profiler.FindProfilerDirs(path), pid)
		if len(runs) == 0 {
			return nil, fmt.Errorf("%s: %s", path, why)
		}
		return runs, nil
	}
	return nil, fmt.Errorf("%s: not profiler output: %s", path, in.whyOr())
}

// Beside returns the profiler runs in a snapshot file's directory of the
// snapshot's process (RunsOf's rule; nil when there are none).
func Beside(snapshot string) []string {
	pid, _ := PID(snapshot)
	runs, _ := runsOf(profiler.FindProfilerDirs(filepath.Dir(snapshot)), pid)
	return runs
}

// runsOf picks the runs of process pid (RunsOf's rule), by name; why says
// why none or not all were taken.
func runsOf(runs []string, pid int) ([]string, string) {
	if len(runs) == 0 {
		return nil, "no profiler directories in it"
	}
	pids := map[int]bool{}
	var mine []string
	for _, r := range runs {
		if p, ok := PID(r); ok {
			pids[p] = true
			if p == pid {
				mine = append(mine, r)
			}
		}
	}
	switch {
	case len(pids) == 0:
		mine = runs // no name tells: one process's directory
	case pid == 0 && len(pids) == 1:
		mine = runs
	case pid == 0:
		return nil, fmt.Sprintf("profiler runs of %d processes (pids %s) and nothing names which: name one run", len(pids), pidList(pids))
	case len(mine) == 0:
		return nil, fmt.Sprintf("no profiler run of process %d (its runs are of pids %s)", pid, pidList(pids))
	}
	mine = slices.Clone(mine)
	slices.Sort(mine)
	return mine, ""
}

func pidList(pids map[int]bool) string {
	ps := make([]int, 0, len(pids))
	for p := range pids {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// snapshotsIn returns the snapshot files directly in dir, oldest first. A
// file is one by its content (Content); a JSON file also names a
// snapshot's keys in its first bytes, so that a job's other JSON files
// (configs, metrics) are not taken for one. Hidden files (editors' and
// atomic writers' temporaries) and empty files are skipped.
func snapshotsIn(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // a symlink to a file is followed; FIFOs and sockets are refused by the open
		}
		p := filepath.Join(dir, e.Name())
		if isSnapshotFile(p) {
			out = append(out, p)
		}
	}
	return byMtime(out), nil
}

// snapshotSniff is how much of a file snapshotsIn reads.
const snapshotSniff = 4 << 10

func isSnapshotFile(p string) bool {
	f, err := safefile.Open(p) // never blocks on a FIFO named *.pickle
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, snapshotSniff)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	k, _ := Content(head)
	switch k {
	case SnapshotPickle:
		return true
	case SnapshotJSON:
		return bytes.Contains(head, []byte(`"segments"`)) || bytes.Contains(head, []byte(`"device_traces"`)) ||
			bytes.Contains(head, []byte(`"total_size"`))
	}
	return false
}

// byMtime sorts paths oldest first by modification time, then name.
func byMtime(paths []string) []string {
	type pm struct {
		p string
		t int64
	}
	ps := make([]pm, 0, len(paths))
	for _, p := range paths {
		var t int64
		if st, err := os.Stat(p); err == nil {
			t = st.ModTime().UnixNano()
		}
		ps = append(ps, pm{p, t})
	}
	slices.SortFunc(ps, func(a, b pm) int {
		if c := cmp.Compare(a.t, b.t); c != 0 {
			return c
		}
		return cmp.Compare(a.p, b.p)
	})
	out := make([]string, len(ps))
	for i, x := range ps {
		out[i] = x.p
	}
	return out
}
