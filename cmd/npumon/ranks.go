package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"

	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/ranks"
	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/tui"
	"github.com/npumon/npumon/tui/rankview"
)

// rankLoad is the loader of one rank's capture into its Store.
func rankLoad(m jobdir.Member, st *store.Store) func(ctx context.Context, report func(tui.Progress)) error {
	return func(ctx context.Context, report func(tui.Progress)) error {
		if _, err := watch.Load(ctx, m.Path, st, watch.LoadOptions{Report: report}); err != nil {
			return fmt.Errorf("rank %d: %w", m.Rank, err)
		}
		return nil
	}
}

// ranksFromMembers gives each member a Store and its loader.
func ranksFromMembers(members []jobdir.Member) []rankview.Rank {
	out := make([]rankview.Rank, len(members))
	for i, m := range members {
		st := store.New(store.Options{})
		out[i] = rankview.Rank{Rank: m.Rank, Name: filepath.Base(m.Path), Store: st, Load: rankLoad(m, st)}
	}
	return out
}

// ranksSummaryJSON is --headless on a ranks directory: each rank's figures
// at its newest entry and the imbalance of the peaks.
type ranksSummaryJSON struct {
	Source    string            `json:"source"`
	Ranks     []ranks.Figures   `json:"ranks"`
	Imbalance []ranks.Imbalance `json:"imbalance"`
}

// loadRanks runs every loader (two at a time) and returns the first error.
func loadRanks(ctx context.Context, rs []rankview.Rank) error {
	var wg sync.WaitGroup
	errs := make([]error, len(rs))
	sem := make(chan struct{}, 2)
	for i, r := range rs {
		if r.Load == nil {
			continue
		}
		crash.GoBounded(&wg, sem, func() {
			errs[i] = r.Load(ctx, func(tui.Progress) {})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func writeRanksSummary(w io.Writer, source string, rs []rankview.Rank) error {
	out := ranksSummaryJSON{Source: source, Ranks: []ranks.Figures{}, Imbalance: []ranks.Imbalance{}}
	for _, r := range rs {
		if f, ok := ranks.FromStore(r.Rank, r.Store); ok {
			out.Ranks = append(out.Ranks, f)
		}
	}
	if ims := ranks.Compare(out.Ranks); len(out.Ranks) >= 2 {
		out.Imbalance = ims
	}
	return writeJSON(w, out)
}

// openRank opens a rank of the overview (enter) in the usual terminal UI;
// captures, when set, gives the rank's capture picker (c).
func openRank(captures func(r rankview.Rank) tui.Captures) func(rankview.OpenSpec) rankview.Child {
	return func(s rankview.OpenSpec) rankview.Child {
		o := tui.Options{Source: s.Rank.Store, SourceName: s.Title, Live: s.Live, ASCII: s.ASCII, NoColor: s.NoColor,
			Renderer: s.Renderer, Location: s.Location, Device: s.Device, Back: s.Back}
		if captures != nil {
			o.Captures = captures(s.Rank)
		}
		return tui.New(o)
	}
}
