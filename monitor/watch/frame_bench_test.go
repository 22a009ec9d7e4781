package watch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/benchcpu"
	"github.com/npumon/npumon/monitor/store"
)

// BenchmarkFrameWhileStreaming1M: how long a UI frame's queries take while
// a 1M-entry file streams into the Store (LoadOptions.Stream), the waits
// behind the stream's write lock included. A second goroutine plays the
// screen every 20 ms once the first entries are in: the devices, the
// bounds, a 200-column series, the summary and state at the loaded end
// (the cursor AT END), the events around it. It reports the frames'
// median, 90th percentile and longest time (frame-p50-ns, frame-p90-ns,
// frame-max-ns) and their number per load.
func BenchmarkFrameWhileStreaming1M(b *testing.B) {
	benchcpu.EachSnapshot1M(b, func(b *testing.B, path string) {
		var frames []time.Duration
		for b.Loop() {
			st := store.New(store.Options{})
			done := make(chan struct{})
			played := make(chan struct{})
			go func() {
				defer close(played)
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
					}
					if st.Version() == 0 || !slices.Contains(st.Devices(), 0) {
						continue
					}
					t0 := time.Now()
					first, last := st.Bounds(0)
					st.Series(0, first, last+1, 200)
					n := st.Len(0)
					st.SummaryAtSeq(0, n)
					st.StateAtSeq(0, n)
					st.EventsAroundSeq(0, n, 20, 0)
					frames = append(frames, time.Since(t0))
				}
			}()
			if _, err := Load(context.Background(), path, st, LoadOptions{DropTrace: true, Stream: true}); err != nil {
				b.Fatal(err)
			}
			close(done)
			<-played
		}
		if len(frames) == 0 {
			return
		}
		slices.Sort(frames)
		b.ReportMetric(float64(frames[len(frames)/2].Nanoseconds()), "frame-p50-ns")
		b.ReportMetric(float64(frames[len(frames)*9/10].Nanoseconds()), "frame-p90-ns")
		b.ReportMetric(float64(frames[len(frames)-1].Nanoseconds()), "frame-max-ns")
		b.ReportMetric(float64(len(frames))/float64(b.N), "frames/op")
	})
}
