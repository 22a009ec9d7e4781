package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor/store"
)

// TestDemoFlagErrors: bad workload options are usage errors (exit 2) with
// the flag named.
func TestDemoFlagErrors(t *testing.T) {
	for i, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--scenario", "chaos"}, `unknown scenario "chaos"`},
		{[]string{"demo", "--rate", "0"}, "--rate"},
		{[]string{"demo", "--device-mem", "lots"}, "--device-mem"},
		{[]string{"demo", "--device-mem", "0"}, "--device-mem"},
		{[]string{"demo", "--device-mem", "2048TiB"}, "--device-mem"},
		{[]string{"demo", "--on-oom", "panic"}, "--on-oom"},
		{[]string{"demo", "--device-mem", "1MiB"}, "at least 256 MiB"},
		{[]string{"sim", "--listen", "nowhere"}, "bad address"},
		{[]string{"demo", "extra"}, "unexpected argument"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			code, _, errOut := captureRun(t, c.args...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut, c.want)
			}
		})
	}
}

// demoUntil runs `npumon demo ARGS --headless 2m` into v and ends the run
// as soon as cond holds of the demo's store (demoWatch): how long the job
// takes to get there depends on the machine, what it gets to does not. The
// 2 minutes only bound a run that never gets there.
func demoUntil(t *testing.T, v any, cond func(*store.Store) bool, args ...string) {
	t.Helper()
	stop := make(chan struct{})
	demoWatch = func(st *store.Store, end func()) {
		go func() {
			for !cond(st) {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			end()
		}()
	}
	defer func() { demoWatch = nil; close(stop) }()
	runJSON(t, v, append(append([]string{"demo"}, args...), "--headless", "2m")...)
}

// TestDemoHeadless runs the demo's data path for a moment: the live Store
// fills from the in-process allocator and the summary is the newest state.
func TestDemoHeadless(t *testing.T) {
	var s replaySummaryJSON
	demoUntil(t, &s, func(st *store.Store) bool { return st.Len(0) >= 1000 }, "--rate", "20", "--layers", "2", "--device-mem", "16GiB")
	if !strings.HasPrefix(s.Source, "demo · steady · pid ") || s.TimeBase != "epoch_us" || s.Entries < 1000 ||
		s.Applied == 0 || s.Applied > s.Entries || s.ReservedBytes <= 0 || s.Segments == nil || *s.Segments == 0 || s.PeakActiveBytes < s.ActiveBytes {
		t.Fatalf("summary %+v", s)
	}
}

// TestDemoHeadlessEndsWithTheJob: a job shorter than --headless ends the run
// (10 minutes asked; a run still going after a minute has missed the end), and
// the summary is of the whole job.
func TestDemoHeadlessEndsWithTheJob(t *testing.T) {
	got := make(chan [2]string, 1)
	go func() {
		code, out, errOut := captureRun(t, "demo", "--headless", "10m", "--steps", "3", "--rate", "50", "--layers", "2", "--device-mem", "16GiB")
		got <- [2]string{fmt.Sprint(code, " ", errOut), out}
	}()
	select {
	case r := <-got:
		var s replaySummaryJSON
		if err := json.Unmarshal([]byte(r[1]), &s); err != nil || r[0] != "0 " {
			t.Fatalf("exit %s, %v", r[0], err)
		}
		if s.Entries == 0 || s.Applied != s.Entries || s.PeakActiveBytes == 0 {
			t.Fatalf("summary %+v", s)
		}
	case <-time.After(time.Minute):
		t.Fatal("demo --headless 10m --steps 3 still running after a minute")
	}
}

// TestDemoRanksTwoDiffer: at --ranks 2 the deliberate skew already shows —
// rank 1 holds one layer more than rank 0 and peaks above it (r/2 rounded
// down gave both ranks the same model).
func TestDemoRanksTwoDiffer(t *testing.T) {
	code, out, errOut := captureRun(t, "demo", "--ranks", "2", "--steps", "2", "--rate", "50", "--layers", "2",
		"--device-mem", "16GiB", "--headless", "2m")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sum struct {
		Ranks []struct {
			Rank              int   `json:"rank"`
			PeakReservedBytes int64 `json:"peak_reserved_bytes"`
			PeakActiveBytes   int64 `json:"peak_active_bytes"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || len(sum.Ranks) != 2 {
		t.Fatalf("summary %v: %s", err, out)
	}
	r0, r1 := sum.Ranks[0], sum.Ranks[1]
	if r0.PeakActiveBytes <= 0 || r1.PeakActiveBytes <= r0.PeakActiveBytes || r1.PeakReservedBytes < r0.PeakReservedBytes {
		t.Fatalf("rank 1 does not peak above rank 0: %+v", sum.Ranks)
	}
}
