package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/memusage"
)

// classifyInput decides what path is by its content (monitor/classify), the
// one way every command reads its argument.
func classifyInput(path string) (classify.Input, error) {
	return classify.Path(path)
}

// jobInput resolves path when it is a job's dump directory (snapshots and
// profiler runs side by side, classify.ResolveJob): ok is false for
// anything else (a file, a profiler run, a plain directory).
func jobInput(path string) (j classify.Job, ok bool, err error) {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return classify.Job{}, false, nil
	}
	in, err := classifyInput(path)
	if err != nil || !classify.IsJobDir(in) {
		return classify.Job{}, false, err
	}
	j, err = classify.ResolveJob(path)
	return j, err == nil, err
}

// snapshotInput is the snapshot file a snapshot-reading command opens for
// path: path itself, or a job's dump directory's newest snapshot (with the
// profiler runs of its process, which a command may take as --profiler).
func snapshotInput(path string) (file string, runs []string, err error) {
	j, ok, err := jobInput(path)
	if err != nil || !ok {
		return path, nil, err
	}
	if j.Snapshot == "" {
		return "", nil, fmt.Errorf("%s: no snapshot file in it, only profiler runs (%d; stats and replay read them)", path, len(j.AllRuns))
	}
	return j.Snapshot, j.Runs, nil
}

// requireSnapshot is the check of the commands that read snapshot files
// only (check, whatif, export): it returns the file to read (path, or a
// job directory's newest snapshot, snapshotInput); anything else is
// refused with one line naming what the path is.
func requireSnapshot(path, cmd string) (string, error) {
	file, _, err := snapshotInput(path)
	if err != nil {
		return "", err
	}
	in, err := classifyInput(file)
	if err != nil {
		return "", err
	}
	return file, in.SnapshotOnly(cmd)
}

// unreadable is the error for an input no command reads.
func unreadable(in classify.Input) error { return errors.New(in.Describe()) }

// implausible reports what replay.Sanity found in path's snapshot: a
// warning on w naming the first offender, or with strict the error.
func implausible(w io.Writer, path string, p *replay.Implausible, strict bool) error {
	if p == nil {
		return nil
	}
	if strict {
		return fmt.Errorf("%s: impossible values: %v", path, p)
	}
	fmt.Fprintf(w, "npumon: warning: %s: impossible values, figures are suspect: %v (--strict makes this an error)\n", path, p)
	return nil
}

// memUsageBeside reads torch_npu's memUsageInfo CSVs paired with a
// snapshot file (replay/memusage: same directory, device, nearest stamp);
// one that does not parse is a one-line warning on w, not an error.
func memUsageBeside(snapshot string, devices []int, w io.Writer) []*memusage.File {
	fs, errs := memusage.ReadBeside(snapshot, devices)
	for _, err := range errs {
		fmt.Fprintf(w, "npumon: warning: %v (memory outside the allocator not shown)\n", err)
	}
	return fs
}

// memUsageOf is tui.Options.MemUsage for the snapshot file path() names
// ("" while none is open): the CSVs paired with it for devices(), read once
// per file and device count. A CSV that does not parse is left out here
// (explain names it).
func memUsageOf(path func() string, devices func() []int) func() []*memusage.File {
	var mu sync.Mutex
	var last string
	var lastN = -1
	var files []*memusage.File
	return func() []*memusage.File {
		p, devs := path(), devices()
		mu.Lock()
		defer mu.Unlock()
		if p != last || len(devs) != lastN {
			last, lastN, files = p, len(devs), nil
			if p != "" {
				files, _ = memusage.ReadBeside(p, devs)
			}
		}
		return files
	}
}
