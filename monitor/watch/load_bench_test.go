package watch

import (
	"context"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

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

// BenchmarkLoadSnapshotStream1M compares the two ways `npumon replay`
// can load a file: drop (DropTrace: decoded whole, then the Store takes
// the trace) and stream (Stream: the decoder hands its entries to the
// Store in batches as it goes). Besides CPU and live-B (the heap in use
// once loaded) it reports peak-heap-B, the most heap in use during the
// load (sampled every millisecond), first-ns, the time from Load's start
// until the Store first has entries (the first screen can come up), and
// settle-ns, the time from the end of decoding to Load's return (stream:
// the settling; drop: the indexing).
func BenchmarkLoadSnapshotStream1M(b *testing.B) {
	for _, way := range []string{"drop", "stream"} {
		b.Run(way, func(b *testing.B) {
			benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
				c0 := benchcpu.Now()
				var st *store.Store
				var capt *replay.Capture
				var first, settle time.Duration // first: the slowest iteration's
				var peakHeap uint64
				for b.Loop() {
					st, capt = nil, nil
					runtime.GC()
					st = store.New(store.Options{})
					start := time.Now()
					var decoded time.Time
					var firstHere time.Duration
					stop := make(chan struct{})
					sampled := make(chan struct{})
					go func() {
						defer close(sampled)
						s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
						tick := time.NewTicker(time.Millisecond)
						defer tick.Stop()
						for {
							metrics.Read(s)
							peakHeap = max(peakHeap, s[0].Value.Uint64())
							if firstHere == 0 && st.Version() > 0 {
								firstHere = time.Since(start)
							}
							select {
							case <-stop:
								return
							case <-tick.C:
							}
						}
					}()
					o := LoadOptions{DropTrace: true, Stream: way == "stream", Report: func(p store.LoadProgress) {
						if p.Stage != "decoding" && decoded.IsZero() {
							decoded = time.Now()
						}
					}}
					l, err := Load(context.Background(), path, st, o)
					if err != nil {
						b.Fatal(err)
					}
					close(stop)
					<-sampled
					if firstHere == 0 { // drop: the Store has entries once Load is done
						firstHere = time.Since(start)
					}
					settle += time.Since(decoded)
					first = max(first, firstHere)
					capt = l.Capture
				}
				benchcpu.Report(b, c0, 0, "")
				b.ReportMetric(float64(peakHeap), "peak-heap-B")
				b.ReportMetric(float64(first.Nanoseconds()), "first-ns")
				b.ReportMetric(float64(settle.Nanoseconds())/float64(b.N), "settle-ns")
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapAlloc), "live-B")
				runtime.KeepAlive(st)
				runtime.KeepAlive(capt)
			})
		})
	}
}
