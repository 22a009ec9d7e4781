package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/replay"
)

const benchRanks = 8

// benchFixture is the largest real capture in the repository.
const benchFixture = "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"

// scrape serves one GET /metrics from h and fails on a non-200 answer.
func scrape(b *testing.B, h http.Handler) {
	req := httptest.NewRequest("GET", "/metrics", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 || w.Body.Len() == 0 {
		b.Fatalf("scrape: %d, %d bytes", w.Code, w.Body.Len())
	}
}

func handler(b *testing.B, targets ...Target) http.Handler {
	reg := prometheus.NewRegistry()
	if len(targets) > 0 {
		reg.MustRegister(New(targets...))
	} else {
		// the baseline: one constant gauge, so the answer is not empty
		reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "npumon_bench_baseline"}))
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// BenchmarkScrapeBaseline: a registry with one constant gauge, through the
// same HTTP handler (the cost of the handler and encoder alone).
func BenchmarkScrapeBaseline(b *testing.B) {
	h := handler(b)
	b.ResetTimer()
	for b.Loop() {
		scrape(b, h)
	}
}

// BenchmarkScrape8Ranks: 8 ranks x 1 device, each a Store holding the real
// capture; the Stores do not change between scrapes.
func BenchmarkScrape8Ranks(b *testing.B) {
	var targets []Target
	for r := range benchRanks {
		st := store.New(store.Options{})
		if _, err := watch.Load(context.Background(), fixture.Path(b, benchFixture), st, watch.LoadOptions{}); err != nil {
			b.Fatal(err)
		}
		targets = append(targets, Target{Store: st, Rank: r, PID: 1000 + r})
	}
	h := handler(b, targets...)
	b.ResetTimer()
	for b.Loop() {
		scrape(b, h)
	}
}

// BenchmarkScrape8RanksLive: the same 8 ranks fed live, 64 new entries per
// rank between two scrapes (what a busy job appends in a scrape interval
// is more, but the Summary at the head rolls from the last checkpoint, at
// most K entries, either way).
func BenchmarkScrape8RanksLive(b *testing.B) {
	c, err := replay.DecodeFile(fixture.Path(b, benchFixture), replay.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tl, err := replay.NewTimeline(c.Snapshot, 0)
	if err != nil {
		b.Fatal(err)
	}
	trace := c.Snapshot.DeviceTraces[0]
	var targets []Target
	for r := range benchRanks {
		st := store.New(store.Options{})
		if err := st.StartLive(&snapshot.Snapshot{Segments: tl.Initial}, nil); err != nil {
			b.Fatal(err)
		}
		targets = append(targets, Target{Store: st, Rank: r, PID: 1000 + r})
	}
	h := handler(b, targets...)
	next := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if next+64 > len(trace) {
			next = 0
		}
		for _, t := range targets {
			t.Store.Append(0, trace[next:next+64])
		}
		next += 64
		b.StartTimer()
		scrape(b, h)
	}
}
