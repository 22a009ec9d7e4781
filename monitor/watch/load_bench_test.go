package watch

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

// BenchmarkLoadSnapshot1M is what `npumon replay` does before its first
// full frame: Load (decode + Store ingest + ops) of a generated
// 1,000,000-entry file into a fresh Store. It reports CPU per op beside
// wall time, and the heap in use once loaded (capture and Store kept, as
// replay keeps them) as live-B.
func BenchmarkLoadSnapshot1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		c0 := benchcpu.Now()
		var st *store.Store
		var capt *replay.Capture
		for b.Loop() {
			st, capt = nil, nil // the last iteration's load is garbage now
			st = store.New(store.Options{})
			var err error
			var l Loaded
			l, err = Load(context.Background(), path, st, LoadOptions{})
			capt = l.Capture
			if err != nil {
				b.Fatal(err)
			}
		}
		benchcpu.Report(b, c0, 0, "")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc), "live-B")
		runtime.KeepAlive(st)
		runtime.KeepAlive(capt)
	})
}

// BenchmarkLoadSnapshotReplay1M is LoadSnapshot1M as `npumon replay` loads
// (DropTrace: the Store takes the decoded trace); live-B is the heap in use
// once loaded, capture and Store kept.
func BenchmarkLoadSnapshotReplay1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		c0 := benchcpu.Now()
		var st *store.Store
		var capt *replay.Capture
		for b.Loop() {
			st, capt = nil, nil
			st = store.New(store.Options{})
			l, err := Load(context.Background(), path, st, LoadOptions{DropTrace: true})
			if err != nil {
				b.Fatal(err)
			}
			capt = l.Capture
		}
		benchcpu.Report(b, c0, 0, "")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc), "live-B")
		runtime.KeepAlive(st)
		runtime.KeepAlive(capt)
	})
}

// BenchmarkLoadSnapshotDecode1M is the decoding share of BenchmarkLoadSnapshot1M
// (the full model, as replay needs it).
func BenchmarkLoadSnapshotDecode1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		c0 := benchcpu.Now()
		for b.Loop() {
			if _, err := replay.DecodeFile(path, replay.Options{}); err != nil {
				b.Fatal(err)
			}
		}
		benchcpu.Report(b, c0, 0, "")
	})
}

// BenchmarkLoadSnapshotIngest1M is the Store's share: IngestSnapshot of a
// capture decoded once outside the timer.
func BenchmarkLoadSnapshotIngest1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		c, err := replay.DecodeFile(path, replay.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		c0 := benchcpu.Now()
		for b.Loop() {
			st := store.New(store.Options{})
			if err := st.IngestSnapshot(c.Snapshot); err != nil {
				b.Fatal(err)
			}
		}
		benchcpu.Report(b, c0, 0, "")
	})
}

// BenchmarkLoadPythonPickleLoad1M is the baseline: CPython's C-accelerated
// pickle.load of the same file in a child process (interpreter start-up
// included, as for `npumon replay`).
func BenchmarkLoadPythonPickleLoad1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		b.ReportMetric(float64(benchcpu.PythonPickleLoad(b, path).Nanoseconds()), "cpu-ns/op") // the child's
	})
}

// BenchmarkLoadedStateAt1M is a random cursor's StateAt + Summary on the
// Store Load built from a generated file (its checkpoints are as
// ingest spaced them).
func BenchmarkLoadedStateAt1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		st := store.New(store.Options{})
		if _, err := Load(context.Background(), path, st, LoadOptions{}); err != nil {
			b.Fatal(err)
		}
		first, last := st.Bounds(0)
		r := rand.New(rand.NewPCG(1, 2))
		b.ResetTimer()
		c0 := benchcpu.Now()
		for b.Loop() {
			c := first + r.Int64N(last-first+1)
			st.StateAt(0, c)
			st.Summary(0, c)
		}
		benchcpu.Report(b, c0, 0, "")
	})
}
