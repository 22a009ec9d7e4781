package main

import (
	"io"

	"github.com/npumon/npumon/monitor/align"
	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// profilerFlagHelp is the help of --profiler on the commands that read a
// snapshot.
const profilerFlagHelp = "a torch_npu profiler run of the same job, or a directory of runs (those of the file's process, by the pid in the names) (repeatable): its ops and ProfilerStep#N steps join the file's own ranges, and a trace without time_us gets its times from their memory records (docs/timerecovery.md)"

// recoverTimes gives the entries of c's devices that have no times of their
// own the times of the profiler runs dirs (monitor/align). Without dirs it
// takes the runs beside the snapshot whose names carry the snapshot's
// process id. Runs it does not use are named on warn, one line each.
func recoverTimes(c *replay.Capture, dirs []string, warn io.Writer) (*align.Result, error) {
	res, _, err := recoverTimesRuns(c, dirs, warn)
	return res, err
}

// decodeRecovered decodes the snapshot at path and recovers its entries'
// times from the profiler runs in dirs (and beside it), as every command
// that reads one capture does before its work.
func decodeRecovered(path string, dirs []string, warn io.Writer) (*replay.Capture, error) {
	c, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := recoverTimes(c, dirs, warn); err != nil {
		return nil, err
	}
	return c, nil
}

// recoverTimesRuns is recoverTimes also returning the runs it read
// (watch.RecoverTimes).
func recoverTimesRuns(c *replay.Capture, dirs []string, warn io.Writer) (*align.Result, []*profiler.Data, error) {
	return watch.RecoverTimes(c, watch.RecoverOptions{Dirs: dirs}, warn)
}

// recoveredNote is the header's line for device dev (-1: the first):
// "times recovered 97 %" (watch.RecoveredNote).
func recoveredNote(res *align.Result, dev int) string { return watch.RecoveredNote(res, dev) }

// runsBeside lists the profiler runs in the snapshot's directory of the
// snapshot's process (classify.Beside).
func runsBeside(path string) []string { return classify.Beside(path) }

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
