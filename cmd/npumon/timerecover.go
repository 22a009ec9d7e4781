package main

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/profiler/align"
	"github.com/npumon/npumon/replay"
)

// profilerFlagHelp is the help of --profiler on the commands that read a
// snapshot.
const profilerFlagHelp = "a torch_npu profiler directory of the same job (repeatable): its ops and ProfilerStep#N steps join the file's own ranges, and a torch_npu trace without time_us gets its times from its memory records (docs/timerecovery.md)"

// Process ids in the names jobs give their files: a snapshot
// NAME_PID_YYYYMMDDhhmmss… and a profiler run HOST_PID_TIMESTAMP_ascend_pt.
var (
	snapshotPIDRe = regexp.MustCompile(`_(\d+)_\d{14}\d*\.[A-Za-z]+$`)
	runPIDRe      = regexp.MustCompile(`_(\d+)_\d+` + profiler.DirNameSuffix + `$`)
)

func pidIn(re *regexp.Regexp, name string) uint64 {
	m := re.FindStringSubmatch(name)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseUint(m[1], 10, 64)
	return v
}

// recoverTimes gives the entries of c's devices that have no times of their
// own the times of the profiler runs dirs (profiler/align). Without dirs it
// takes the runs beside the snapshot whose names carry the snapshot's
// process id. Runs it does not use are named on warn, one line each.
func recoverTimes(c *replay.Capture, dirs []string, warn io.Writer) (*align.Result, error) {
	res, _, err := recoverTimesRuns(c, dirs, warn)
	return res, err
}

// recoverTimesRuns is recoverTimes also returning the runs it read.
func recoverTimesRuns(c *replay.Capture, dirs []string, warn io.Writer) (*align.Result, []*profiler.Data, error) {
	if c.Snapshot.HasTimestamps() {
		return nil, nil, nil
	}
	pid := pidIn(snapshotPIDRe, filepath.Base(c.Path))
	if len(dirs) == 0 {
		if dirs = runsBeside(c.Path); len(dirs) == 0 {
			return nil, nil, nil
		}
	}
	var runs []align.Run
	var data []*profiler.Data
	for _, dir := range dirs {
		d, err := profiler.ReadDir(dir)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, align.Run{Data: d, PID: pidIn(runPIDRe, filepath.Base(filepath.Clean(dir)))})
		data = append(data, d)
	}
	res := align.Recover(c.Snapshot, runs, align.Options{PID: pid})
	for _, r := range res.Refused {
		fmt.Fprintf(warn, "npumon: times not recovered from %s\n", r)
	}
	return &res, data, nil
}

// recoveredNote is the header's line for device dev: "times recovered 97 %".
func recoveredNote(res *align.Result, dev int) string {
	if res == nil {
		return ""
	}
	d := res.Device(dev)
	if d == nil || d.Source != align.SourceRecovered {
		return ""
	}
	return fmt.Sprintf("times recovered %.0f %%", 100*d.Share())
}

// runsBeside lists the profiler runs in the snapshot's directory whose
// names carry the process id of the snapshot's name.
func runsBeside(path string) []string {
	pid := pidIn(snapshotPIDRe, filepath.Base(path))
	if pid == 0 {
		return nil
	}
	var out []string
	for _, d := range profiler.FindProfilerDirs(filepath.Dir(path)) {
		if pidIn(runPIDRe, filepath.Base(d)) == pid {
			out = append(out, d)
		}
	}
	return out
}

// noteRecovered puts the recovery's source and share into st's devices.
func noteRecovered(st *replay.Stats, res *align.Result) {
	if res == nil {
		return
	}
	for i := range st.Devices {
		ds := &st.Devices[i]
		d := res.Device(ds.Device)
		if d == nil || d.Source != align.SourceRecovered {
			continue
		}
		from, share := d.From, d.Share()
		ds.TimeRecoveredFrom, ds.TimeRecoveredShare = &from, &share
	}
}

// statsRecovered is replay.StatsFile with the times of the profiler runs
// dirs (or beside path): the whole trace is kept to put times on it when
// there are runs or an index; else the file is streamed.
func statsRecovered(path string, opts replay.StatsOptions, dirs []string, warn io.Writer) (*replay.Stats, error) {
	if len(dirs) == 0 && opts.AtIndex == nil && len(runsBeside(path)) == 0 {
		return replay.StatsFile(path, opts)
	}
	capt, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		return nil, err
	}
	res, err := recoverTimes(capt, dirs, warn)
	if err != nil {
		return nil, err
	}
	st, err := replay.ComputeStats(capt, opts)
	if err != nil {
		return nil, err
	}
	noteRecovered(st, res)
	return st, nil
}
