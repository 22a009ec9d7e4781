package rankview

import (
	"context"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/ranks"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
)

// benchRanks: 8 ranks, each a Store holding the largest real capture.
func benchRanks(b *testing.B) Options {
	path := fixture.Path(b, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	var rs []Rank
	for r := range 8 {
		st := store.New(store.Options{})
		if _, err := watch.Load(context.Background(), path, st, watch.LoadOptions{}); err != nil {
			b.Fatal(err)
		}
		rs = append(rs, Rank{Rank: r, Name: "snap.pickle", Store: st})
	}
	return Options{Title: "bench", Ranks: rs}
}

// BenchmarkFigures8: the data a frame needs, read straight from the 8
// Stores (the baseline).
func BenchmarkFigures8(b *testing.B) {
	o := benchRanks(b)
	b.ResetTimer()
	for b.Loop() {
		var figs []ranks.Figures
		for _, r := range o.Ranks {
			f, _ := ranks.FromStore(r.Rank, r.Store)
			figs = append(figs, f)
		}
		ranks.Compare(figs)
	}
}

// BenchmarkOverviewFrame: a tick that finds every Store changed (all 8
// figures read again) and the 80x24 frame drawn.
func BenchmarkOverviewFrame(b *testing.B) {
	m := New(benchRanks(b))
	m.Init()
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	b.ResetTimer()
	for b.Loop() {
		for i := range m.have {
			m.have[i] = false
		}
		m.poll()
		_ = m.View()
	}
}
