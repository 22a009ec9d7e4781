package tui

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// bigStore is a live Store with n entries on device 0: 64 segments of
// 64 MiB, then alloc / free_requested / free_completed cycles over 1 MiB
// slots keeping about half of them live, 10 µs apart, with stacks and ops.
func bigStore(tb testing.TB, n int) *store.Store {
	tb.Helper()
	st := store.New(store.Options{})
	if err := st.StartLive(nil, []store.DeviceInfo{{ID: 0, Name: "Ascend910B3", HBMTotal: 64 << 30}}); err != nil {
		tb.Fatal(err)
	}
	const segs, slots = 64, 64
	base := uint64(0x7f0000000000)
	t := t0
	ents := make([]snapshot.TraceEntry, 0, n)
	for s := 0; s < segs; s++ {
		ents = append(ents, snapshot.TraceEntry{Action: snapshot.ActionSegmentAlloc, Addr: base + uint64(s)<<26, Size: 64 << 20, TimeUS: t})
		t += 10
	}
	live := make([]bool, segs*slots)
	x := uint64(12345)
	for len(ents) < n {
		x = x*6364136223846793005 + 1442695040888963407
		i := int(x>>33) % (segs * slots)
		addr := base + uint64(i/slots)<<26 + uint64(i%slots)<<20
		size := int64(1<<20) - int64(x>>50)
		if live[i] {
			ents = append(ents,
				snapshot.TraceEntry{Action: snapshot.ActionFreeRequested, Addr: addr, Size: size, TimeUS: t},
				snapshot.TraceEntry{Action: snapshot.ActionFreeCompleted, Addr: addr, Size: size, TimeUS: t + 5})
		} else {
			ents = append(ents, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: addr, Size: size, TimeUS: t})
		}
		live[i] = !live[i]
		t += 10
	}
	ents = ents[:n]
	for i := 0; i < len(ents); i += 65536 {
		st.Append(0, ents[i:min(i+65536, len(ents))])
	}
	var ops []store.Op
	for s := t0; s < t; s += 100_000 {
		ops = append(ops, store.Op{Name: "ProfilerStep#", StartUS: s, EndUS: s + 100_000, IsStep: true, Seq: -1})
		ops = append(ops, store.Op{Name: "aten::matmul", StartUS: s + 10, EndUS: s + 50_000, Thread: 1, Seq: -1})
	}
	st.IngestOps(ops)
	return st
}

var benchStore *store.Store

func loadBench(b *testing.B) *Model {
	if benchStore == nil {
		benchStore = bigStore(b, 1_000_000)
	}
	o := testOptions(benchStore)
	// Measure the colour path a real terminal takes.
	o.Renderer = lipgloss.NewRenderer(io.Discard)
	o.Renderer.SetColorProfile(termenv.TrueColor)
	m := newSized(b, o, 200, 60)
	if !m.th.Color {
		b.Fatal("benchmark should render in colour")
	}
	if m.d.n != 1_000_000 {
		b.Fatalf("store has %d entries", m.d.n)
	}
	press(m, "t")
	typeText(m, "+5s") // the middle of the 10 s trace
	press(m, "enter")
	return m
}

// BenchmarkViewFullScreen renders the whole 200×60 screen from the cached
// query results (what a redraw costs).
func BenchmarkViewFullScreen(b *testing.B) {
	m := loadBench(b)
	b.ResetTimer()
	for b.Loop() {
		m.dirty = true
		m.p.tl.tl.Invalidate()
		_ = m.View()
	}
}

// BenchmarkRefreshAndView re-queries everything (series for 194 columns,
// state, summary, events, ops) and renders: what a data change costs.
func BenchmarkRefreshAndView(b *testing.B) {
	m := loadBench(b)
	b.ResetTimer()
	for b.Loop() {
		m.refreshData()
		_ = m.View()
	}
}

// BenchmarkCursorMove is one → key: next event, cursor queries, redraw.
func BenchmarkCursorMove(b *testing.B) {
	m := loadBench(b)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			press(m, "right")
		} else {
			press(m, "left")
		}
		_ = m.View()
	}
}

// BenchmarkCursorJump scrubs across the trace (shift+→ = 1/20 of the view).
func BenchmarkCursorJump(b *testing.B) {
	m := loadBench(b)
	press(m, "g")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%20 == 19 {
			press(m, "g")
		}
		press(m, "shift+right")
		_ = m.View()
	}
}

// BenchmarkBaselineStoreQueries is what a cursor move must pay the Store
// (state, summary and the trace around the cursor) before drawing anything.
func BenchmarkBaselineStoreQueries(b *testing.B) {
	m := loadBench(b)
	src := m.o.Source
	c := m.Cursor()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		cur := c + int64(i%2)*10
		_ = src.StateAt(0, cur)
		_ = src.Summary(0, cur)
		_ = src.EventsAround(0, cur, 40, 40)
	}
}

// BenchmarkBaselineNtchartsCanvasView renders the 200-column timeline's
// ntcharts canvas with its own View (one lipgloss Render per cell), the
// path the pane avoids.
func BenchmarkBaselineNtchartsCanvasView(b *testing.B) {
	m := loadBench(b)
	m.p.tl.tl.View() // draw once
	lc := m.p.tl.tl.DebugChart()
	b.ResetTimer()
	for b.Loop() {
		_ = lc.View()
	}
}

// BenchmarkTimelineView redraws the same chart (ntcharts drawing, our
// run-length rendering) from the same series.
func BenchmarkTimelineView(b *testing.B) {
	m := loadBench(b)
	b.ResetTimer()
	for b.Loop() {
		m.p.tl.tl.Invalidate()
		_ = m.p.tl.tl.View()
	}
}

// firstFrame is the model's first frame with data at 200×60 in colour:
// New, Init, the window size, one tick (the poll that finds the Source's
// data: devices, bounds, series, ops, the cursor queries) and View.
// loading says a Load is still running (progressive replay: the screen
// comes up over the prefix loaded so far, under the progress line).
func firstFrame(b *testing.B, st *store.Store, loading bool) string {
	o := testOptions(st)
	o.Renderer = lipgloss.NewRenderer(io.Discard)
	o.Renderer.SetColorProfile(termenv.TrueColor)
	if loading {
		o.Load = func(ctx context.Context, report func(Progress)) error { <-ctx.Done(); return ctx.Err() }
	}
	m := New(o)
	m.Init() // the loader's command is not run: the load "goes on"
	if loading {
		m.ld.report(Progress{Stage: "decoding", BytesDone: 8 << 20, BytesTotal: 800 << 20, Entries: st.Len(0)})
	}
	m.Update(tea.WindowSizeMsg{Width: 200, Height: 60})
	m.Update(tickMsg(fixedNow))
	v := m.View()
	m.Close()
	return v
}

// BenchmarkFirstFrame is the time from the model's start to its first
// frame with data, over a Store holding a prefix of a file still loading
// (64 Ki entries: the first chunks of a 10 M-entry file; and 1 M), against
// the same over the whole 1 M-entry Store once loaded (today's first
// frame, after all of the file was decoded). The decode itself is the
// loader's (replay), not measured here.
func BenchmarkFirstFrame(b *testing.B) {
	for _, bc := range []struct {
		name    string
		n       int
		loading bool
	}{
		{"loaded=1M", 1_000_000, false},
		{"loading_prefix=1M", 1_000_000, true},
		{"loading_prefix=64Ki", 1 << 16, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var st *store.Store
			if bc.n == 1_000_000 {
				if benchStore == nil {
					benchStore = bigStore(b, 1_000_000)
				}
				st = benchStore
			} else {
				st = bigStore(b, bc.n)
			}
			v := firstFrame(b, st, bc.loading)
			for range 10 { // warm: the first frames over a Store pay its lazy caches
				firstFrame(b, st, bc.loading)
			}
			runtime.GC() // building the Store's garbage is not the frame's
			if !strings.Contains(v, "Timeline") || strings.Contains(v, "8.00 MiB of 800 MiB") != bc.loading {
				b.Fatalf("first frame:\n%s", v)
			}
			b.ResetTimer()
			for b.Loop() {
				firstFrame(b, st, bc.loading)
			}
		})
	}
}
