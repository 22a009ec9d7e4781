package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestStatsRanksJSON: stats --json on a directory of three ranks' snapshots
// (monitor/ranks/jobdir/testdata/gen_ranks.py, whose docstring works out these
// figures) gives every rank and the imbalance of the peaks.
func TestStatsRanksJSON(t *testing.T) {
	var s struct {
		Kind  string `json:"kind"`
		Ranks []struct {
			Rank              int    `json:"rank"`
			Path              string `json:"path"`
			Kind              string `json:"kind"`
			Rule              string `json:"rule"`
			Device            int    `json:"device"`
			PeakReservedBytes int64  `json:"peak_reserved_bytes"`
			PeakActiveBytes   *int64 `json:"peak_active_bytes"`
			OOMEvents         int    `json:"oom_events"`
			Stats             struct {
				Kind    string `json:"kind"`
				Devices []struct {
					Device            int   `json:"device"`
					PeakReservedBytes int64 `json:"peak_reserved_bytes"`
				} `json:"devices"`
			} `json:"stats"`
		} `json:"ranks"`
		Imbalance []struct {
			Figure   string  `json:"figure"`
			MaxRank  int     `json:"max_rank"`
			MaxBytes int64   `json:"max_bytes"`
			MinRank  int     `json:"min_rank"`
			MinBytes int64   `json:"min_bytes"`
			Ratio    float64 `json:"max_over_min"`
		} `json:"imbalance"`
	}
	runJSON(t, &s, "stats", "--json", "../../monitor/ranks/jobdir/testdata/job")
	const MiB = 1 << 20
	want := []struct {
		res, act int64
		ooms     int
	}{{20 * MiB, 10 * MiB, 0}, {40 * MiB, 30 * MiB, 1}, {30 * MiB, 15 * MiB, 0}}
	if s.Kind != "ranks" || len(s.Ranks) != 3 {
		t.Fatalf("%+v", s)
	}
	for i, r := range s.Ranks {
		w := want[i]
		if r.Rank != i || r.Device != i || r.Kind != "snapshot" || r.Rule != "name" || r.PeakReservedBytes != w.res ||
			r.PeakActiveBytes == nil || *r.PeakActiveBytes != w.act || r.OOMEvents != w.ooms ||
			filepath.Base(r.Path) != "snapshot_rank"+string(rune('0'+i))+"_step10.pickle" || r.Stats.Kind != "snapshot" {
			t.Errorf("rank %d: %+v", i, r)
		}
	}
	if len(s.Imbalance) != 2 {
		t.Fatalf("imbalance %+v", s.Imbalance)
	}
	res, act := s.Imbalance[0], s.Imbalance[1]
	if res.Figure != "peak_reserved_bytes" || res.MaxRank != 1 || res.MinRank != 0 || res.MaxBytes != 40*MiB || res.MinBytes != 20*MiB || res.Ratio != 2 {
		t.Errorf("reserved imbalance %+v", res)
	}
	if act.Figure != "peak_active_bytes" || act.MaxRank != 1 || act.MinRank != 0 || act.Ratio != 3 {
		t.Errorf("active imbalance %+v", act)
	}
}

// TestStatsRanksProfilerFixture: the real two-rank profiler output, which
// used to be refused ("name one"), reads as two ranks.
func TestStatsRanksProfilerFixture(t *testing.T) {
	code, out, errOut := captureRun(t, "stats", fixture.Path(t, "ascend_profiler"))
	if code != 0 || !strings.Contains(out, "2 ranks (0…1)") || !strings.Contains(out, "peak_reserved_bytes: max/min") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// ranksSummary is --headless on a ranks directory.
type ranksSummary struct {
	Ranks []struct {
		Rank              int   `json:"rank"`
		Device            int   `json:"device"`
		PeakReservedBytes int64 `json:"peak_reserved_bytes"`
		PeakActiveBytes   int64 `json:"peak_active_bytes"`
		OOMs              int   `json:"ooms"`
	} `json:"ranks"`
	Imbalance []struct {
		Figure  string  `json:"figure"`
		MaxRank int     `json:"max_rank"`
		Ratio   float64 `json:"max_over_min"`
	} `json:"imbalance"`
}

func checkJobSummary(t *testing.T, s ranksSummary) {
	t.Helper()
	const MiB = 1 << 20
	if len(s.Ranks) != 3 || s.Ranks[1].PeakReservedBytes != 40*MiB || s.Ranks[1].OOMs != 1 || s.Ranks[2].PeakActiveBytes != 15*MiB ||
		len(s.Imbalance) != 3 || s.Imbalance[0].Figure != "peak_reserved_bytes" || s.Imbalance[0].MaxRank != 1 || s.Imbalance[0].Ratio != 2 {
		t.Fatalf("%+v", s)
	}
}

// TestReplayRanksHeadless: replay on a ranks directory loads every rank
// into its own Store; the figures match gen_ranks.py's.
func TestReplayRanksHeadless(t *testing.T) {
	var s ranksSummary
	runJSON(t, &s, "replay", "--headless", "1ms", "../../monitor/ranks/jobdir/testdata/job")
	checkJobSummary(t, s)
}

// TestWatchRanksHeadless: watch on rank{N} directories watches each.
func TestWatchRanksHeadless(t *testing.T) {
	dir := t.TempDir()
	for r := range 3 {
		name := "snapshot_rank" + string(rune('0'+r)) + "_step10.pickle"
		b, err := os.ReadFile(filepath.Join("../../monitor/ranks/jobdir/testdata/job", name))
		if err != nil {
			t.Fatal(err)
		}
		rd := filepath.Join(dir, "rank"+string(rune('0'+r)))
		if err := os.Mkdir(rd, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(rd, "snap.pickle"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var s ranksSummary
	runJSON(t, &s, "watch", "--headless", "1ms", dir) // the window counts from every rank's capture being open
	checkJobSummary(t, s)
}

func TestStatsRanksRefusesOneCaptureFlags(t *testing.T) {
	for _, f := range [][]string{{"--device", "1"}, {"--at-index", "0"}} {
		code, _, errOut := captureRun(t, append([]string{"stats"}, append(f, "../../monitor/ranks/jobdir/testdata/job")...)...)
		if code != exitUsage || !strings.Contains(errOut, "holds 3 ranks (0…2)") {
			t.Errorf("%v: exit %d %q", f, code, errOut)
		}
	}
}
