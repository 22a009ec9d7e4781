package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInputsByContent: every command reads its argument by content — an
// SQLite export under any name, a trace_view.json as profiler ops (never
// as a snapshot), and snapshot-only commands refuse profiler data with one
// line and exit 2.
func TestInputsByContent(t *testing.T) {
	db := filepath.Join(profFixtures(t), "msinsight_msprof_0.db")
	tv := filepath.Join(profFixtures(t), "mstt", "trace_view.json")
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(t.TempDir(), "capture.bin")
	if err := os.WriteFile(renamed, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout for exit 0, in stderr otherwise
	}{
		{"db named directly", []string{"stats", db}, 0, "ops       17"},
		{"db under another name", []string{"stats", renamed}, 0, "memory    494 records"},
		{"trace_view.json is profiler ops", []string{"stats", tv}, 0, "ops       710"},
		{"trace_view.json json", []string{"stats", "--json", tv}, 0, `"kind": "profiler"`},
		{"whatif refuses trace_view.json", []string{"whatif", tv}, 2, "not a memory snapshot"},
		{"check refuses a db", []string{"check", "--no-oom", db}, 2, "profiler SQLite export, not a memory snapshot"},
		{"export refuses a db", []string{"export", db, "--to", "json", "-o", filepath.Join(t.TempDir(), "x.json")}, 2, "not a memory snapshot"},
		{"replay refuses a plain directory", []string{"replay", "--headless", "10ms", t.TempDir()}, 2, "not a profiler directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := captureRun(t, tc.args...)
			got := out
			if tc.code != 0 {
				got = errOut
				if strings.Count(strings.TrimSpace(errOut), "\n") > 1 {
					t.Errorf("more than one line of error: %q", errOut)
				}
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Errorf("%v: exit %d, out %q, err %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.want)
			}
			if strings.Contains(out, "snapshot, torch") {
				t.Errorf("%v was read as a snapshot: %s", tc.args, out)
			}
		})
	}
	var s replaySummaryJSON
	runJSON(t, &s, "replay", "--headless", "50ms", db)
	if s.AllocatedBytes == nil || s.ReservedBytes == 0 {
		t.Errorf("replay --headless of the db named directly: %+v", s)
	}
}

// TestReplayAnalysedProfilerHeadless: replaying an analysed-only profiler
// directory prints the figures its memory_record totals state (peak
// allocated 4599.86 MB, reserved 8664 MB) and says there is no block-level
// trace — not zeros.
func TestReplayAnalysedProfilerHeadless(t *testing.T) {
	var s replaySummaryJSON
	runJSON(t, &s, "replay", "--headless", "50ms", filepath.Join(profFixtures(t), "msinsight_rank0"))
	if s.Entries != 3 || s.AllocatedBytes == nil || *s.AllocatedBytes != 4823308800 || s.PeakReservedBytes != 8664<<20 ||
		s.Segments != nil || !strings.Contains(s.Note, "no block-level trace") {
		t.Errorf("summary %+v", s)
	}
}
