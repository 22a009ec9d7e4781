package watch_test

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/monitor/workload"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// untimedDemo runs the demo's OOM job and returns its last snapshot decoded
// with the times removed (the torch_npu flavour), the true times of device
// 0, the snapshot's path and the job's profiler runs.
func untimedDemo(t *testing.T) (*replay.Capture, []int64, string, []string) {
	t.Helper()
	src := t.TempDir()
	w, err := workload.New(workload.Config{Scenario: workload.OOM, OnOOM: workload.Stop, Seed: 5, Steps: 40,
		DeviceMem: 16 << 30, Out: src})
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Run(context.Background()) // Stop ends with the OOM error
	files := w.Files()
	if len(files) == 0 || len(w.ProfilerDirs()) == 0 {
		t.Fatal("no snapshot or no profiler runs")
	}
	pkl := files[len(files)-1]
	c, err := replay.DecodeFile(pkl, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Snapshot.DeviceTraces[0]
	truth := make([]int64, len(tr))
	for i := range tr {
		truth[i], tr[i].TimeUS = tr[i].TimeUS, 0
	}
	return c, truth, pkl, w.ProfilerDirs()
}

// TestDirSourceRecoversTimes: a torch_npu-flavoured snapshot (no time_us)
// landing in a watched directory beside the complete profiler runs of its
// process opens with the runs' times: every entry the Store holds with a
// time of its own is within the profiler clock's resolution (1 µs) of the
// truth, every interval's lower bound (store.Event.Interval) is at or
// before it, and the header's note says so.
func TestDirSourceRecoversTimes(t *testing.T) {
	c, truth, pkl, runs := untimedDemo(t)
	tr := c.Snapshot.DeviceTraces[0]
	dir := t.TempDir()
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	<-wd.Ready()
	// The job's runs land, then its snapshot (same pid in the names).
	for _, p := range runs {
		if err := os.CopyFS(filepath.Join(dir, filepath.Base(p)), os.DirFS(p)); err != nil {
			t.Fatal(err)
		}
	}
	snap := filepath.Join(dir, filepath.Base(pkl))
	if err := replay.WriteFile(snap, c.Snapshot, replay.WritePickle, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the snapshot to open", func() bool { return wd.Current() == snap && st.Len(0) == int64(len(tr)) })

	checkRecovered(t, wd, st, tr, truth)
}

// checkRecovered checks the open snapshot's times in st against the truth:
// every entry with a time of its own within the profiler clock's
// resolution (1 µs), every interval's lower bound (store.Event.Interval)
// at or before it, and the header's note says so.
func checkRecovered(t *testing.T, wd *watch.DirSource, st *store.Store, tr []snapshot.TraceEntry, truth []int64) {
	t.Helper()
	note := wd.TimesNote()
	if !strings.HasPrefix(note, "times recovered ") || st.TimeBase(0) != store.TimeEpochUS {
		t.Fatalf("note %q, time base %v, errors %v", note, st.TimeBase(0), wd.Errors())
	}
	evs := st.Events(0, math.MinInt64, math.MaxInt64, 0)
	if len(evs) != len(tr) {
		t.Fatalf("%d events, trace has %d", len(evs), len(tr))
	}
	exact := 0
	for _, e := range evs {
		want := truth[e.Seq]
		if e.Interval { // only the lower bound is known
			if e.Time > want {
				t.Fatalf("entry %d (%s): lower bound %d after the truth %d", e.Seq, e.ActionName, e.Time, want)
			}
			continue
		}
		if d := e.Time - want; d < -1 || d > 1 {
			t.Fatalf("entry %d (%s): recovered %d, truth %d", e.Seq, e.ActionName, e.Time, want)
		}
		exact++
	}
	if exact < len(evs)/5 {
		t.Fatalf("only %d of %d entries with a time of their own (%s)", exact, len(evs), note)
	}
	t.Logf("%s: %d of %d entries with a time of their own, each within 1 µs of the truth", note, exact, len(evs))
}

// TestDirSourceIncompleteRun: a profiler run still being written (no
// profiler_info*.json yet, not analysed) gives no times; once it is
// complete (its profiler_info*.json written) the open snapshot is aligned
// again, with no reopening.
func TestDirSourceIncompleteRun(t *testing.T) {
	c, truth, pkl, runs := untimedDemo(t)
	dir := t.TempDir()
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	<-wd.Ready()
	var held []string // the files a finished run adds
	for _, p := range runs {
		to := filepath.Join(dir, filepath.Base(p))
		err := filepath.WalkDir(p, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(p, path)
			if e.IsDir() {
				if rel == profiler.OutputDir {
					return fs.SkipDir // not analysed yet
				}
				return os.MkdirAll(filepath.Join(to, rel), 0o755)
			}
			if strings.HasPrefix(e.Name(), "profiler_info") {
				held = append(held, path, filepath.Join(to, rel))
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(to, rel), b, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(held) == 0 {
		t.Fatal("the demo's runs have no profiler_info*.json")
	}
	snap := filepath.Join(dir, filepath.Base(pkl))
	if err := replay.WriteFile(snap, c.Snapshot, replay.WritePickle, 0); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the snapshot to open", func() bool { return wd.Current() == snap })
	if n := wd.TimesNote(); n != "" || st.TimeBase(0) != store.TimeSequence {
		t.Fatalf("with the runs unfinished: note %q, time base %v", n, st.TimeBase(0))
	}
	for i := 0; i < len(held); i += 2 {
		b, err := os.ReadFile(held[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(held[i+1], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the times to be recovered", func() bool { return strings.HasPrefix(wd.TimesNote(), "times recovered ") })
	checkRecovered(t, wd, st, c.Snapshot.DeviceTraces[0], truth)
}

// TestDirSourceRunLandsLater: the snapshot lands alone and opens without
// times; the job's profiler runs land after it (complete, copied in) and
// the open snapshot gets their times. While the user holds the snapshot
// (SetHold) it is not aligned again; once the hold ends it is.
func TestDirSourceRunLandsLater(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprintf("hold=%t", hold), func(t *testing.T) {
			c, truth, pkl, runs := untimedDemo(t)
			tr := c.Snapshot.DeviceTraces[0]
			dir := t.TempDir()
			st := store.New(store.Options{})
			wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true})
			if err := wd.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer wd.Stop()
			<-wd.Ready()
			snap := filepath.Join(dir, filepath.Base(pkl))
			if err := replay.WriteFile(snap, c.Snapshot, replay.WritePickle, 0); err != nil {
				t.Fatal(err)
			}
			poll.Until(t, "the snapshot to open", func() bool { return wd.Current() == snap && st.Len(0) == int64(len(tr)) })
			if n := wd.TimesNote(); n != "" || st.TimeBase(0) != store.TimeSequence {
				t.Fatalf("before the runs: note %q, time base %v", n, st.TimeBase(0))
			}
			wd.SetHold(hold)
			for _, p := range runs {
				if err := os.CopyFS(filepath.Join(dir, filepath.Base(p)), os.DirFS(p)); err != nil {
					t.Fatal(err)
				}
			}
			if hold {
				// the held snapshot keeps its sequence axis (a watch that
				// ignored the hold would have aligned it by now: the
				// runs' events come within a poll or two)
				poll.Until(t, "the runs to be listed", func() bool { return runsListed(wd, runs) })
				time.Sleep(time.Second)
				if n := wd.TimesNote(); n != "" || st.TimeBase(0) != store.TimeSequence {
					t.Fatalf("held: note %q, time base %v", n, st.TimeBase(0))
				}
				wd.SetHold(false)
			}
			poll.Until(t, "the times to be recovered", func() bool { return strings.HasPrefix(wd.TimesNote(), "times recovered ") })
			checkRecovered(t, wd, st, tr, truth)
		})
	}
}

// runsListed reports whether wd lists every run of runs.
func runsListed(wd *watch.DirSource, runs []string) bool {
	n := 0
	for _, e := range wd.List() {
		for _, p := range runs {
			if e.Kind == capture.Profiler && filepath.Base(e.Path) == filepath.Base(p) {
				n++
			}
		}
	}
	return n == len(runs)
}
