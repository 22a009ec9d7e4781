package store

import (
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/explain"
)

// The 1,000,000-entry snapshot `make bench-data` writes (Python's pickle).
const bench1MFile = "../../testdata/bench/snapshot_1m.pickle"

var bench1M struct {
	sync.Once
	st  *Store
	err error
}

func benchStore1M(b *testing.B) *Store {
	b.Helper()
	if _, err := os.Stat(bench1MFile); err != nil {
		b.Skip("run make bench-data first")
	}
	bench1M.Do(func() {
		c, err := replay.DecodeFile(bench1MFile, replay.Options{})
		if err != nil {
			bench1M.err = err
			return
		}
		bench1M.st = New(Options{})
		bench1M.err = bench1M.st.IngestSnapshot(c.Snapshot)
	})
	if bench1M.err != nil {
		b.Fatal(bench1M.err)
	}
	return bench1M.st
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// BenchmarkHoldersAt1M: the holders view at an arbitrary cursor of the 1M
// snapshot — the live allocations (LiveAtSeq) grouped by call site —
// with StateAtSeq at the same positions (what every cursor move already
// costs) as the baseline; reports both medians and their ratio.
func BenchmarkHoldersAt1M(b *testing.B) {
	st := benchStore1M(b)
	n := st.Len(0)
	g := &explain.Grouper{By: explain.ByCallsite, Stack: st.Stack}
	r := rand.New(rand.NewPCG(3, 4))
	var hold, base []time.Duration
	for b.Loop() {
		pos := r.Int64N(n + 1)
		t0 := time.Now()
		s := st.StateAtSeq(0, pos+1) // +1: not the answer the holders query leaves cached
		base = append(base, time.Since(t0))
		t0 = time.Now()
		live := st.LiveAtSeq(0, pos)
		groups := g.Group(live, 0)
		hold = append(hold, time.Since(t0))
		if len(s.Segments) == 0 || len(groups) == 0 {
			b.Fatal("empty state")
		}
	}
	mh, mb := median(hold), median(base)
	b.ReportMetric(float64(mh.Nanoseconds()), "median-ns")
	b.ReportMetric(float64(mb.Nanoseconds()), "baseline-median-ns")
	b.ReportMetric(float64(mh)/float64(mb), "x-baseline")
}

// BenchmarkDiff1M: the change between two arbitrary cursors (the holders
// view with mark A): two LiveAtSeq and DiffAllocs.
func BenchmarkDiff1M(b *testing.B) {
	st := benchStore1M(b)
	n := st.Len(0)
	g := &explain.Grouper{By: explain.ByCallsite, Stack: st.Stack}
	r := rand.New(rand.NewPCG(5, 6))
	var durs []time.Duration
	for b.Loop() {
		p, q := r.Int64N(n+1), r.Int64N(n+1)
		t0 := time.Now()
		from, to := st.LiveAtSeq(0, p), st.LiveAtSeq(0, q)
		d := explain.DiffAllocs(g, from, to, true)
		durs = append(durs, time.Since(t0))
		if len(d) == 0 {
			b.Fatal("empty diff")
		}
	}
	b.ReportMetric(float64(median(durs).Nanoseconds()), "median-ns")
}

// BenchmarkHoldersByCategoryAt1M: the holders view grouped by memory
// category at an arbitrary cursor of the 1M snapshot (the categories are
// computed once, on first use, as in the TUI), against StateAtSeq at the
// same positions.
func BenchmarkHoldersByCategoryAt1M(b *testing.B) {
	st := benchStore1M(b)
	n := st.Len(0)
	t0 := time.Now()
	cats := st.Categories(0)
	b.Logf("categories of %d entries: %v", n, time.Since(t0))
	g := &explain.Grouper{By: explain.ByCategory, Stack: st.Stack, Category: explain.CategoryOf(cats)}
	r := rand.New(rand.NewPCG(3, 4))
	var hold, base []time.Duration
	for b.Loop() {
		pos := r.Int64N(n + 1)
		t0 := time.Now()
		s := st.StateAtSeq(0, pos+1)
		base = append(base, time.Since(t0))
		t0 = time.Now()
		live := st.LiveAtSeq(0, pos)
		groups := g.Group(live, 0)
		hold = append(hold, time.Since(t0))
		if len(s.Segments) == 0 || len(groups) == 0 {
			b.Fatal("empty state")
		}
	}
	mh, mb := median(hold), median(base)
	b.ReportMetric(float64(mh.Nanoseconds()), "median-ns")
	b.ReportMetric(float64(mb.Nanoseconds()), "baseline-median-ns")
	b.ReportMetric(float64(mh)/float64(mb), "x-baseline")
}

// BenchmarkCategorySeries1M: the stacked category chart over the whole 1M
// log at 200 columns (the categories already computed), against Series
// (the areas' chart) of the same window.
func BenchmarkCategorySeries1M(b *testing.B) {
	st := benchStore1M(b)
	first, last := st.Bounds(0)
	st.Categories(0)
	var cat, base []time.Duration
	for b.Loop() {
		t0 := time.Now()
		s := st.Series(0, first, last+1, 200)
		base = append(base, time.Since(t0))
		t0 = time.Now()
		c := st.CategorySeries(0, first, last+1, 200)
		cat = append(cat, time.Since(t0))
		if len(c) != 200 || s.Columns != 200 {
			b.Fatal("no columns")
		}
	}
	mc, mb := median(cat), median(base)
	b.ReportMetric(float64(mc.Nanoseconds()), "median-ns")
	b.ReportMetric(float64(mb.Nanoseconds()), "baseline-median-ns")
	b.ReportMetric(float64(mc)/float64(mb), "x-baseline")
}
