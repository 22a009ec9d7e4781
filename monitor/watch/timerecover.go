package watch

import (
	"fmt"
	"io"

	"github.com/npumon/npumon/monitor/align"
	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// RecoverOptions tune RecoverTimes.
type RecoverOptions struct {
	// Dirs are the profiler runs to take, each a run or a directory of
	// runs (those of the snapshot's process, classify.RunsOf). Without
	// them the runs beside the snapshot of its process are taken
	// (classify.Beside).
	Dirs []string
	// CompleteOnly leaves out runs still being written (profiler.Data
	// Complete false), and runs that cannot be read yet, as a watched
	// directory holds them while a job runs.
	CompleteOnly bool
}

// RecoverTimes gives the entries of c's devices that have no times of
// their own the times of the profiler runs of the same job
// (monitor/align, docs/timerecovery.md): the one implementation replay,
// the commands taking --profiler and a watched directory share. It returns
// the runs it read too (nil, nil, nil when the trace has times or there
// are no runs). Runs it does not use are named on warn, one line each.
func RecoverTimes(c *replay.Capture, o RecoverOptions, warn io.Writer) (*align.Result, []*profiler.Data, error) {
	if c.Snapshot.HasTimestamps() {
		return nil, nil, nil
	}
	pid, _ := classify.PID(c.Path)
	var paths []string
	for _, p := range o.Dirs { // a run, or a directory of runs: those of the file's process
		rs, err := classify.RunsOf(p, pid)
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, rs...)
	}
	if len(o.Dirs) == 0 {
		if paths = classify.Beside(c.Path); len(paths) == 0 {
			return nil, nil, nil
		}
	}
	var runs []align.Run
	var data []*profiler.Data
	for _, dir := range paths {
		d, err := profiler.ReadDir(dir)
		if o.CompleteOnly && (err != nil || !d.Complete) {
			continue // still being written: the next capture's open takes it
		}
		if err != nil {
			return nil, nil, err
		}
		rpid, _ := classify.PID(dir)
		runs = append(runs, align.Run{Data: d, PID: uint64(max(rpid, 0))})
		data = append(data, d)
	}
	if len(runs) == 0 {
		return nil, nil, nil
	}
	res := align.Recover(c.Snapshot, runs, align.Options{PID: uint64(max(pid, 0))})
	for _, r := range res.Refused {
		fmt.Fprintf(warn, "npumon: times not recovered from %s\n", r)
	}
	return &res, data, nil
}

// RecoveredNote is the header's line for device dev (-1: the first):
// "times recovered 97 %"; "" when no times were recovered.
func RecoveredNote(res *align.Result, dev int) string {
	if res == nil || len(res.Devices) == 0 {
		return ""
	}
	d := res.Device(dev)
	if dev < 0 {
		d = &res.Devices[0]
	}
	if d == nil || d.Source != align.SourceRecovered {
		return ""
	}
	return fmt.Sprintf("times recovered %.0f %%", 100*d.Share())
}
