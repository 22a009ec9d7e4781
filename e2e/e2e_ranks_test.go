//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRanksDemoStatsAndOverview: demo --ranks writes four ranks' dumps with
// the deliberate skew (rank r holds ⌈r/2⌉ extra layers); stats --json on the
// directory ranks them and names the imbalance; replay on it opens the
// ranks overview in tmux, enter opens a rank's usual view, esc comes back.
func TestRanksDemoStatsAndOverview(t *testing.T) {
	bin := npumonBin(t)
	dir := filepath.Join(t.TempDir(), "job")
	var sum struct {
		Ranks []struct {
			Rank              int   `json:"rank"`
			PeakReservedBytes int64 `json:"peak_reserved_bytes"`
		} `json:"ranks"`
	}
	runJSON(t, bin, &sum, "demo", "--ranks", "4", "--steps", "3", "--rate", "20", "--layers", "2", "--device-mem", "16GiB",
		"--out", dir, "--snapshot-every", "1", "--headless", "2m") // ends with the jobs; 2m only bounds a hang
	if len(sum.Ranks) != 4 {
		t.Fatalf("demo summary %+v", sum)
	}
	for r := range 4 {
		m, _ := filepath.Glob(filepath.Join(dir, "rank"+string(rune('0'+r)), "snapshot_*.pickle"))
		if len(m) == 0 {
			t.Fatalf("rank %d wrote no snapshot", r)
		}
	}

	var st struct {
		Kind  string `json:"kind"`
		Ranks []struct {
			Rank              int    `json:"rank"`
			Kind              string `json:"kind"`
			PeakReservedBytes int64  `json:"peak_reserved_bytes"`
		} `json:"ranks"`
		Imbalance []struct {
			Figure   string  `json:"figure"`
			MaxRank  int     `json:"max_rank"`
			MinRank  int     `json:"min_rank"`
			MaxBytes int64   `json:"max_bytes"`
			MinBytes int64   `json:"min_bytes"`
			Ratio    float64 `json:"max_over_min"`
		} `json:"imbalance"`
	}
	runJSON(t, bin, &st, "stats", "--json", dir)
	if st.Kind != "ranks" || len(st.Ranks) != 4 || len(st.Imbalance) == 0 {
		t.Fatalf("stats %+v", st)
	}
	// the skew: ranks 1 and 2 hold one more layer than rank 0, rank 3 two more
	r := st.Ranks
	if !(r[1].PeakReservedBytes > r[0].PeakReservedBytes && r[2].PeakReservedBytes == r[1].PeakReservedBytes &&
		r[3].PeakReservedBytes > r[2].PeakReservedBytes) {
		t.Fatalf("no skew in peak reserved: %+v", r)
	}
	im := st.Imbalance[0]
	if im.Figure != "peak_reserved_bytes" || im.MaxRank != 3 || im.MinRank != 0 || im.MaxBytes != r[3].PeakReservedBytes ||
		im.MinBytes != r[0].PeakReservedBytes || im.Ratio <= 1 {
		t.Fatalf("imbalance %+v", im)
	}

	p := startTmux(t, 80, 24, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", dir)
	p.waitFor("npumon · ranks · job · 4 ranks", "peak max/min: reserved", "rank 3 / rank 0")
	p.waitGone("· loading") // enter opens a rank once it has loaded, not before
	p.send("Down", "Enter")
	p.waitFor("rank 1 · …", "Timeline")
	p.send("Escape")
	screen := p.waitFor("4 ranks", "▶ 1")
	if strings.Contains(screen, "Timeline") {
		t.Fatalf("still in the rank view:\n%s", screen)
	}
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
