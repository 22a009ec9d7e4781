package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/testdata/fixture"
)

// TestStatsRanksJSON: stats --json on a directory of three ranks' snapshots
// (monitor/ranks/testdata/gen_ranks.py, whose docstring works out these
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
	runJSON(t, &s, "stats", "--json", "../../monitor/ranks/testdata/job")
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
