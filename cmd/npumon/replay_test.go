package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/workload"
)

func needFixture(t *testing.T, p string) string {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("test data %s: %v", p, err)
	}
	return p
}

func headlessSummary(t *testing.T, args ...string) replaySummaryJSON {
	t.Helper()
	var s replaySummaryJSON
	runJSON(t, &s, append([]string{"replay"}, args...)...)
	return s
}

func TestReplayHeadlessOpensAtTheEnd(t *testing.T) {
	snap := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	s := headlessSummary(t, "--headless", "50ms", snap)
	// Numbers of the real file: 5163 entries, 216 segments at the end, times in epoch µs.
	if s.Entries != 5163 || s.Applied != 5163 || s.Segments == nil || *s.Segments != 216 || s.TimeBase != "epoch_us" ||
		s.Cursor != s.LastTime || s.ReservedBytes != 14180941824 {
		t.Fatalf("summary %+v", s)
	}
}

func TestReplayHeadlessPlays(t *testing.T) {
	snap := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	// The trace spans 0.25 s: at ×0.01 playing a quarter of it takes over 6 s,
	// so a 20 ms run (however late a loaded machine ends it) stays near the
	// start; at ×1000 all of it plays.
	slow := headlessSummary(t, "--headless", "20ms", "--play", "--speed", "0.01", snap)
	if slow.Applied > slow.Entries/4 || slow.Cursor >= slow.FirstTime+(slow.LastTime-slow.FirstTime)/4 {
		t.Fatalf("slow playback should still be at the initial state: %+v", slow)
	}
	fast := headlessSummary(t, "--headless", "1s", "--play", "--speed", "1000", snap)
	if fast.Applied != 5163 || fast.PeakActiveBytes != 13923997700 {
		t.Fatalf("fast playback should reach the end: %+v", fast)
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pickle")
	os.WriteFile(bad, []byte("\x80\x04\x95garbage"), 0o644)
	for i, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay"}, 2, "takes 1 argument"},
		{[]string{"replay", "--headless", "10ms", filepath.Join(dir, "missing.pickle")}, 2, "missing.pickle: no such file"},
		{[]string{"replay", "--headless", "10ms", bad}, 2, "bad.pickle: offset"},
		// a directory with a snapshot opens it (a job's dump directory)
		{[]string{"replay", "--headless", "10ms", dir}, 2, "bad.pickle: offset"},
		{[]string{"replay", "--headless", "10ms", t.TempDir()}, 2, "not a profiler directory"},
		{[]string{"replay", "--speed", "0", bad}, 2, "--speed must be between"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			code, _, errOut := captureRun(t, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
				t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
			}
		})
	}
}

// TestReplayProfilerDirectory replays a Python-generated raw FRAMEWORK
// profiler directory: its PTA memory records become the trace (36 entries,
// four allocations of 0.5–2 MiB live together at the peak, all freed).
func TestReplayProfilerDirectory(t *testing.T) {
	dir := needFixture(t, "../../profiler/testdata/framework/gen_4242_20261129120000123_ascend_pt")
	s := headlessSummary(t, "--headless", "50ms", dir)
	if s.Entries != 36 || s.Applied != 36 || s.PeakActiveBytes != 5<<20 || s.ActiveBytes != 0 || s.TimeBase != "epoch_us" {
		t.Fatalf("summary %+v", s)
	}
	// Analysed output without raw records: the totals its memory records
	// state are the series, one memory_record entry each, and the summary
	// says there is no block-level trace (TestReplayAnalysedProfilerHeadless).
	csv := fixture.Path(t, "ascend_profiler/msinsight_rank0")
	if s := headlessSummary(t, "--headless", "50ms", csv); s.Entries != 3 || s.Note == "" || s.Segments != nil {
		t.Fatalf("analysed output: %+v", s)
	}
}

// TestReplayAnalysedProfilerDirectory replays what the demo's job writes:
// an analysed profiler directory whose FRAMEWORK files are still there (as
// torch_npu leaves them). Its raw memory records are the trace, and the
// totals they state count the model loaded before the profiled window: the
// trace alone would end near 0 B active and 0 B reserved.
func TestReplayAnalysedProfilerDirectory(t *testing.T) {
	dir := t.TempDir()
	w := finishedWorkload(t, workload.Config{Layers: 2, DeviceMem: 16 << 30, Steps: 6, Out: dir, SnapshotEvery: -1})
	dirs := w.ProfilerDirs()
	if len(dirs) == 0 {
		t.Fatal("the job wrote no profiler directory")
	}
	prof := dirs[0]
	if _, err := os.Stat(filepath.Join(prof, "ASCEND_PROFILER_OUTPUT", "analyse.done")); err != nil {
		t.Fatalf("not analysed: %v", err)
	}
	s := headlessSummary(t, "--headless", "50ms", prof)
	final := w.Allocator().Stats()
	if s.Entries == 0 || s.ActiveBytes <= 0 || s.ReservedBytes < s.ActiveBytes || s.PeakActiveBytes < s.ActiveBytes {
		t.Fatalf("summary %+v", s)
	}
	// steady training: between steps the job holds the same weights,
	// gradients and optimizer state, so the window ends within a few MiB of
	// what the job holds when it is over
	end := final.ActiveBytes[allocator.StatAll].Current
	if d := s.ActiveBytes - end; d < -end/20 || d > end/20 {
		t.Fatalf("%d B active at the window's end, the job ends with %d B", s.ActiveBytes, end)
	}
}

// A profiler SQLite export opens as profiler data, not as a snapshot: its
// MEMORY_RECORD rows name no block, so their totals are the series.
func TestReplayProfilerDB(t *testing.T) {
	db := needFixture(t, "../../profiler/testdata/db/ascend_pytorch_profiler_0.db")
	if s := headlessSummary(t, "--headless", "50ms", db); s.TimeBase != "epoch_us" || s.Entries != 2 ||
		s.ReservedBytes != 20<<20 || !strings.Contains(s.Note, "no block-level trace") {
		t.Fatalf("summary %+v", s)
	}
}
