package tui

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/npumon/npumon/internal/testutil/golden"
)

// chunkLoad is an Options.Load that feeds a real Store (liveSource: the
// small capture's entries, Store.Append) in chunks, each when the test
// sends on next the number of entries to have, and reports progress as a
// decoder does (a MiB of a 9 MiB file per entry). Closing next ends the
// load; an error on fail ends it with that error. landed says a chunk is
// in the Store and reported (and, first, that the load started).
type chunkLoad struct {
	ls     *liveSource
	next   chan int
	fail   chan error
	landed chan struct{}
}

func newChunkLoad() *chunkLoad {
	return &chunkLoad{ls: newLiveSource(), next: make(chan int), fail: make(chan error), landed: make(chan struct{})}
}

func (c *chunkLoad) load(ctx context.Context, report func(Progress)) error {
	report(Progress{Stage: "decoding", BytesTotal: 9 * mib})
	c.landed <- struct{}{} // started
	for {
		select {
		case n, ok := <-c.next:
			if !ok {
				return nil
			}
			c.ls.grow(n)
			report(Progress{Stage: "decoding", BytesDone: int64(n) * mib, BytesTotal: 9 * mib, Entries: int64(n)})
			c.landed <- struct{}{}
		case err := <-c.fail:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// chunk has the loader land the first n entries.
func (c *chunkLoad) chunk(n int) {
	c.next <- n
	<-c.landed
}

// atomicClock is a clock the test sets while the program reads it.
type atomicClock struct{ ns atomic.Int64 }

func (c *atomicClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *atomicClock) Now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }

// startLoading builds an 80×24 ASCII model over cl, runs Init and starts
// its commands (the loader among them) in the background; what they
// return comes on the channel.
func startLoading(t *testing.T, cl *chunkLoad, clk *atomicClock, before ...func(*Model)) (*Model, chan tea.Msg) {
	t.Helper()
	clk.set(fixedNow)
	o := testOptions(cl.ls)
	o.Now, o.ASCII, o.Load = clk.Now, true, cl.load
	m := New(o)
	for _, f := range before {
		f(m)
	}
	cmds := m.Init()
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	msgs := make(chan tea.Msg, 8)
	for _, c := range cmds().(tea.BatchMsg) {
		if c != nil {
			go func() { msgs <- c() }()
		}
	}
	t.Cleanup(m.Close)
	<-cl.landed
	return m, msgs
}

// loadDone waits for the loader's end.
func loadDone(msgs chan tea.Msg) loadDoneMsg {
	for msg := range msgs {
		if ld, ok := msg.(loadDoneMsg); ok {
			return ld
		}
	}
	panic("unreachable")
}

// tickAt moves the clock to fixedNow+d and delivers a tick.
func tickAt(m *Model, clk *atomicClock, d time.Duration) string {
	clk.set(fixedNow.Add(d))
	m.Update(tickMsg(clk.Now()))
	return m.View()
}

func wantIn(t *testing.T, v string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(v, w) {
			t.Fatalf("screen lacks %q:\n%s", w, v)
		}
	}
}

func wantNotIn(t *testing.T, v string, not ...string) {
	t.Helper()
	for _, w := range not {
		if strings.Contains(v, w) {
			t.Fatalf("screen has %q:\n%s", w, v)
		}
	}
}

// TestProgressiveLoad: the loading screen until the first chunk lands,
// then the normal screen over what is loaded with a progress bar (rate and
// ETA by the injected clock); the cursor stays where the user put it as
// more lands, G makes it stay at the end; keys work throughout; the bar
// goes when the load ends.
func TestProgressiveLoad(t *testing.T) {
	cl, clk := newChunkLoad(), &atomicClock{}
	m, msgs := startLoading(t, cl, clk)

	v := tickAt(m, clk, 0)
	checkFrame(t, v, 80, 24)
	wantIn(t, v, "decoding small.pickle", "0%  0 B of 9.00 MiB  0 entries", "q quits")
	wantNotIn(t, v, "Timeline")
	if cmd := press(m, "G"); cmd != nil || m.Loading() != true {
		t.Fatalf("a key before any data must do nothing, not wait")
	}

	cl.chunk(5) // entries 0..4 at 2 s
	v = tickAt(m, clk, 2*time.Second)
	checkFrame(t, v, 80, 24)
	// 5 of 9 MiB in 2 s: 2.5 entries/s, 4 MiB left at 2.5 MiB/s is 1.6 s.
	wantIn(t, v, "Timeline", "AT END", "entry #4/5+",
		"decoding [########.......] 56%  5.00 MiB of 9.00 MiB  5 entries at 2.5/s  ETA 2s")
	if m.Cursor() != t0+4*tStep {
		t.Fatalf("the first screen opens at the end of what is loaded: cursor %d", m.Cursor())
	}

	press(m, "left") // the user moves: the cursor stays there from now on
	cl.chunk(7)
	v = tickAt(m, clk, 3*time.Second)
	if m.Cursor() != t0+3*tStep {
		t.Fatalf("the cursor jumped as data landed: %d", m.Cursor())
	}
	wantIn(t, v, "PAUSED", "entry #3/7+", "7 entries at 2.33/s", "ETA 1s")

	press(m, "h") // holders over what is loaded
	wantIn(t, m.View(), "Holders by", "entry #3/7+")
	press(m, "esc")

	press(m, "G") // to the end, and stay there
	cl.chunk(8)
	v = tickAt(m, clk, 4*time.Second)
	if m.Cursor() != t0+7*tStep {
		t.Fatalf("after G the cursor should stay at the loaded end: %d", m.Cursor())
	}
	wantIn(t, v, "AT END", "entry #7/8+")

	// an idle tick (nothing new, same clock) draws nothing new
	m.View()
	m.Update(tickMsg(clk.Now()))
	if m.dirty {
		t.Fatalf("a tick without progress must not redraw")
	}

	close(cl.next)
	m.Update(loadDone(msgs))
	v = m.View()
	checkFrame(t, v, 80, 24)
	wantIn(t, v, "PAUSED", "entry #7/8")
	wantNotIn(t, v, "entry #7/8+", "ETA", "decoding", "AT END")
	if m.Err() != nil || m.Loading() || m.Cursor() != t0+7*tStep {
		t.Fatalf("after the load: err %v loading %v cursor %d", m.Err(), m.Loading(), m.Cursor())
	}
	cl.ls.grow(9) // no follow once loaded: a replay's cursor moves only by keys
	m.Update(tickMsg(clk.Now()))
	if m.Cursor() != t0+7*tStep {
		t.Fatalf("the cursor moved after the load: %d", m.Cursor())
	}
}

// TestProgressiveLoadError: an error after data was shown keeps the data
// on screen, says the load failed and the data is incomplete, and is
// returned by Err (Run returns it).
func TestProgressiveLoadError(t *testing.T) {
	cl, clk := newChunkLoad(), &atomicClock{}
	m, msgs := startLoading(t, cl, clk)
	cl.chunk(5)
	tickAt(m, clk, time.Second)
	cl.fail <- errors.New("x.pickle: offset 4096: truncated")
	m.Update(loadDone(msgs))
	v := m.View()
	checkFrame(t, v, 80, 24)
	wantIn(t, v, "Timeline", "load failed: incomplete", "entry #4/5",
		"load failed, showing what loaded before: x.pickle: offset 4096: truncated")
	wantNotIn(t, v, "entry #4/5+", "ETA", "AT END")
	if m.Err() == nil || m.Loading() {
		t.Fatalf("Err should return the load error")
	}
	press(m, "left")
	if m.Cursor() != t0+3*tStep {
		t.Fatalf("keys should still move the cursor over what loaded: %d", m.Cursor())
	}
	wantIn(t, m.View(), "load failed: incomplete")
}

// TestProgressiveLoadPlays: with --play, playback starts at the initial
// state and plays on into what lands instead of stopping at the loaded end.
func TestProgressiveLoadPlays(t *testing.T) {
	cl, clk := newChunkLoad(), &atomicClock{}
	m, _ := startLoading(t, cl, clk, func(m *Model) { m.cur.playing = true }) // --play
	cl.chunk(3)
	tickAt(m, clk, 0)
	if m.Cursor() != t0-1 || !m.Playing() {
		t.Fatalf("play starts at the initial state: cursor %d playing %v", m.Cursor(), m.Playing())
	}
	tickAt(m, clk, time.Second) // 1 s at ×1 is far past the 3 loaded entries
	if m.Cursor() != t0+2*tStep || !m.Playing() {
		t.Fatalf("playback should wait at the loaded end: cursor %d playing %v", m.Cursor(), m.Playing())
	}
	cl.chunk(6)
	tickAt(m, clk, 2*time.Second)
	if m.Cursor() != t0+5*tStep || !m.Playing() {
		t.Fatalf("playback should go on into the new data: cursor %d", m.Cursor())
	}
}

// TestHeadlessWaitsForTheWholeLoad: RunHeadless shows nothing of a load
// in progress (its JSON is of the whole file, as before).
func TestHeadlessWaitsForTheWholeLoad(t *testing.T) {
	cl, clk := newChunkLoad(), &atomicClock{}
	m, msgs := startLoading(t, cl, clk, func(m *Model) { m.ld.whole = true }) // as RunHeadless sets
	cl.chunk(5)
	m.Update(tickMsg(clk.Now()))
	if m.d.hasData || !strings.Contains(m.View(), "decoding small.pickle") {
		t.Fatalf("a headless run must not show a load in progress:\n%s", m.View())
	}
	close(cl.next)
	m.Update(loadDone(msgs))
	if m.Cursor() != t0+4*tStep || strings.Contains(m.View(), "entry #4/5+") {
		t.Fatalf("after the load: cursor %d\n%s", m.Cursor(), m.View())
	}
}

// TestGoldenLoading is the 80×24 ASCII screen of a file half loaded: the
// panes over the loaded part, the progress bar on the status line, the
// rate and ETA by the injected clock (refresh with -update).
func TestGoldenLoading(t *testing.T) {
	cl, clk := newChunkLoad(), &atomicClock{}
	clk.set(fixedNow)
	o := testOptions(cl.ls)
	o.Now, o.ASCII, o.Load = clk.Now, true, cl.load
	m := New(o)
	t.Cleanup(m.Close)
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("decoding small.pickle")) },
		teatest.WithDuration(time.Minute))
	<-cl.landed
	clk.set(fixedNow.Add(2 * time.Second)) // before the chunk: a tick between samples no progress at 0 s
	cl.chunk(5)
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("ETA 2s")) },
		teatest.WithDuration(time.Minute))
	if err := tm.Quit(); err != nil { // not q: that stops the loader, whose end would be drawn
		t.Fatal(err)
	}
	v := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute)).View()
	checkFrame(t, v, 80, 24)
	golden.Check(t, golden.Path(t), []byte(v))
}

// TestProgressLineFits: what does not fit goes, label first, then the
// bytes, then the bar; the rate and ETA texts.
func TestProgressLineFits(t *testing.T) {
	o := testOptions(newLiveSource())
	o.ASCII = true
	m := New(o)
	m.ld.report(Progress{Stage: "decoding", BytesDone: 300 * mib, BytesTotal: 1200 * mib, Entries: 1_234_567})
	m.ld.sample(fixedNow)
	m.ld.report(Progress{Stage: "decoding", BytesDone: 400 * mib, BytesTotal: 1200 * mib, Entries: 2_468_000})
	m.ld.sample(fixedNow.Add(2 * time.Second)) // 617k entries/s, 50 MiB/s: 800 MiB in 16 s
	for _, tc := range []struct {
		w    int
		want string
	}{
		{200, "decoding [##########....................] 33%  400 MiB of 1.17 GiB  2.47 M entries at 617 k/s  ETA 16s"},
		{80, "[######...........] 33%  400 MiB of 1.17 GiB  2.47 M entries at 617 k/s  ETA 16s"},
		{70, "[#########...................] 33%  2.47 M entries at 617 k/s  ETA 16s"},
		{56, "[#####.........] 33%  2.47 M entries at 617 k/s  ETA 16s"},
		{40, "33%  2.47 M entries at 617 k/s  ETA 16s"},
	} {
		if got := m.progressLine(tc.w, true); got != tc.want || len(got) > tc.w {
			t.Errorf("width %d:\n got %q\nwant %q", tc.w, got, tc.want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", 1499 * time.Millisecond: "1s", 65 * time.Second: "1m05s", 3725 * time.Second: "1h02m"} {
		if got := etaText(d); got != want {
			t.Errorf("etaText(%v) = %q, want %q", d, got, want)
		}
	}
}

// abortingSource is a Store whose loader takes back what it streamed when
// the load fails (store.OwnedStream.Abort): its devices go.
type abortingSource struct {
	*liveSource
	gone atomic.Bool
}

func (a *abortingSource) Devices() []int {
	if a.gone.Load() {
		return nil
	}
	return a.liveSource.Devices()
}

func (a *abortingSource) Version() uint64 {
	v := a.liveSource.Version()
	if a.gone.Load() {
		v++
	}
	return v
}

// TestProgressiveLoadErrorTakenBack: a loader that removes what it loaded
// when it fails leaves the error screen, not panes over nothing.
func TestProgressiveLoadErrorTakenBack(t *testing.T) {
	cl, clk := newChunkLoad(), &atomicClock{}
	src := &abortingSource{liveSource: cl.ls}
	m, msgs := startLoading(t, cl, clk, func(m *Model) { m.o.Source = src })
	cl.chunk(5)
	wantIn(t, tickAt(m, clk, time.Second), "Timeline", "entry #4/5+")
	src.gone.Store(true)
	cl.fail <- errors.New("x.pickle: offset 4096: truncated")
	m.Update(loadDone(msgs))
	v := tickAt(m, clk, 2*time.Second)
	checkFrame(t, v, 80, 24)
	wantIn(t, v, "error: x.pickle: offset 4096: truncated", "q quits")
	wantNotIn(t, v, "Timeline", "entry #")
	if m.Err() == nil {
		t.Fatal("Err should return the load error")
	}
}
