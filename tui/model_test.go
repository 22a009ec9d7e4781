package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
)

func small(t testing.TB, w, h int) *Model {
	return newSized(t, testOptions(storeOf(t, smallSnapshot(true), smallOps())), w, h)
}

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func TestViewShowsEveryPane(t *testing.T) {
	m := small(t, 160, 48)
	v := m.View()
	checkFrame(t, v, 160, 48)
	for _, want := range []string{"npumon", "small.pickle", "dev 0 (1 of 1)", "2025-11-29 07:06:40.008", "PAUSED ×1",
		"[1 Timeline]", "2 Segments", "3 Events", "4 Ops", "aten::matmul", "0x7f0000000000", "OOM 1", "entry #8/9"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q", want)
		}
	}
}

func TestEveryLayoutFillsTheScreen(t *testing.T) {
	m := small(t, 80, 24)
	for _, sz := range [][2]int{{80, 24}, {60, 20}, {100, 30}, {120, 40}, {200, 60}, {20, 5}, {1, 1}} {
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		for p := 0; p < int(numPanes); p++ {
			press(m, string(rune('1'+p)))
			checkFrame(t, m.View(), sz[0], sz[1])
		}
	}
}

func TestCompactFocusedPaneGrows(t *testing.T) {
	m := small(t, 80, 24)
	press(m, "2")
	v := m.View()
	if !strings.Contains(v, "[2 Segments]") || !strings.Contains(v, "0x7f0002000000") {
		t.Fatalf("segments pane not shown in compact mode:\n%s", v)
	}
	press(m, "4")
	if v := m.View(); !strings.Contains(v, "[4 Ops]") || !strings.Contains(v, "aten::empty") || strings.Contains(v, "0x7f0002000000") {
		t.Fatalf("ops pane should replace segments:\n%s", v)
	}
	press(m, "tab")
	if m.p.focus != paneTimeline {
		t.Fatalf("tab after ops should wrap to the timeline, got %v", m.p.focus)
	}
}

func TestStepThroughEvents(t *testing.T) {
	m := small(t, 120, 40)
	if m.Cursor() != t0+8*tStep {
		t.Fatalf("replay should open at the last entry, cursor %d", m.Cursor())
	}
	press(m, "g")
	if m.Cursor() != t0-1 || m.Summary().Applied != 0 {
		t.Fatalf("g: cursor %d applied %d, want the initial state", m.Cursor(), m.Summary().Applied)
	}
	press(m, "right", "right")
	if m.Cursor() != t0+tStep || m.Summary().Applied != 2 || m.Summary().ActiveBytes != 8*mib {
		t.Fatalf("→→: cursor %d applied %d active %d", m.Cursor(), m.Summary().Applied, m.Summary().ActiveBytes)
	}
	if v := m.View(); !strings.Contains(v, "07:06:40.001") {
		t.Errorf("header does not show the cursor time:\n%s", v)
	}
	press(m, "left")
	if m.Summary().Applied != 1 {
		t.Fatalf("←: applied %d", m.Summary().Applied)
	}
	press(m, "G")
	if m.Summary().Applied != 9 {
		t.Fatalf("G: applied %d", m.Summary().Applied)
	}
	press(m, "g", "o")
	if m.Cursor() != t0+7*tStep {
		t.Fatalf("o: cursor %d, want the OOM at entry 7", m.Cursor())
	}
	press(m, "o")
	if !strings.Contains(m.View(), "no OOM after the cursor") {
		t.Errorf("second o should say there is no further OOM")
	}
	press(m, "p")
	if m.Cursor() != t0+4*tStep {
		t.Fatalf("p: cursor %d, want the peak at entry 4", m.Cursor())
	}
	press(m, "g", "shift+right")
	if m.Cursor() <= t0-1 {
		t.Fatalf("shift+→ did not move")
	}
}

func TestPlayback(t *testing.T) {
	c := &clock{t: fixedNow}
	o := testOptions(storeOf(t, smallSnapshot(true), smallOps()))
	o.Now = c.Now
	m := newSized(t, o, 120, 40)
	press(m, "g", "space")
	if !m.Playing() || !strings.Contains(m.View(), "REPLAY ×1") {
		t.Fatalf("space should start playing")
	}
	press(m, "[", "[")
	if m.cur.speed != 0.25 {
		t.Fatalf("[[: speed %v", m.cur.speed)
	}
	press(m, "]", "]", "]")
	if m.cur.speed != 2 {
		t.Fatalf("]]]: speed %v", m.cur.speed)
	}
	start := m.Cursor()
	c.t = c.t.Add(time.Millisecond)
	m.Update(tickMsg(c.t))
	if got := m.Cursor() - start; got != 2000 {
		t.Fatalf("1 ms at ×2 moved the cursor %d µs, want 2000", got)
	}
	c.t = c.t.Add(time.Second)
	m.Update(tickMsg(c.t))
	if m.Playing() || m.Cursor() != t0+8*tStep {
		t.Fatalf("playback should stop at the end: playing %v cursor %d", m.Playing(), m.Cursor())
	}
	press(m, "space")
	if m.Cursor() != t0-1 {
		t.Fatalf("play at the end restarts from the beginning, cursor %d", m.Cursor())
	}
}

func TestSequenceBase(t *testing.T) {
	m := newSized(t, testOptions(storeOf(t, smallSnapshot(false), nil)), 120, 40)
	v := m.View()
	if !strings.Contains(v, "no timestamps in this file") || !strings.Contains(v, "#8") {
		t.Fatalf("sequence base not shown:\n%s", v)
	}
	press(m, "t")
	typeText(m, "#3")
	press(m, "enter")
	if m.Cursor() != 3 {
		t.Fatalf("t #3: cursor %d", m.Cursor())
	}
	press(m, "t")
	typeText(m, "12:00:00")
	press(m, "enter")
	if !strings.Contains(m.View(), "no timestamps") || m.Cursor() != 3 {
		t.Fatalf("clock jump in a sequence file must be refused")
	}
}

func TestJump(t *testing.T) {
	m := small(t, 120, 40)
	for in, want := range map[string]int64{
		"07:06:40.004":            t0 + 4*tStep,
		"+2ms":                    t0 + 2*tStep,
		"#5":                      t0 + 5*tStep,
		"#0":                      t0,
		"#8":                      t0 + 8*tStep,
		"2025-11-29 07:06:40.003": t0 + 3*tStep,
	} {
		press(m, "t")
		typeText(m, in)
		if !strings.Contains(m.View(), "jump to") {
			t.Fatalf("prompt not shown")
		}
		press(m, "enter")
		if m.Cursor() != want {
			t.Errorf("t %s: cursor %d, want %d", in, m.Cursor(), want)
		}
	}
	press(m, "t")
	typeText(m, "#9")
	press(m, "enter")
	if !strings.Contains(m.View(), "the log has 9 entries") {
		t.Errorf("#9 is past the end and should say so")
	}
	press(m, "t")
	typeText(m, "yesterday")
	press(m, "enter")
	if !strings.Contains(m.View(), "not a time") {
		t.Errorf("bad jump should explain itself")
	}
	before := m.Cursor()
	press(m, "t")
	typeText(m, "+1ms")
	press(m, "esc")
	if m.Cursor() != before || m.pr.input != inputNone {
		t.Errorf("esc should cancel the prompt")
	}
}

func TestFilter(t *testing.T) {
	m := small(t, 160, 48)
	press(m, "/")
	typeText(m, "size>=6MiB size<=8MiB")
	press(m, "enter")
	v := m.View()
	if !strings.Contains(v, "filter: size>=6MiB size<=8MiB") {
		t.Fatalf("filter not shown:\n%s", v)
	}
	if strings.Contains(v, "512 KiB") || strings.Contains(v, "64.0 MiB") || !strings.Contains(v, "6.00 MiB s0") {
		t.Errorf("events not filtered by size:\n%s", v)
	}
	// The events pane names ops too; look at the ops pane only.
	if ops := v[strings.Index(v, "4 Ops"):]; strings.Contains(ops, "aten::empty") || !strings.Contains(ops, "aten::matmul") {
		t.Errorf("ops not filtered by size:\n%s", v)
	}
	press(m, "/")
	m.pr.ti.SetValue("")
	typeText(m, "matmul")
	press(m, "enter")
	if v := m.View(); strings.Contains(v[strings.Index(v, "4 Ops"):], "aten::empty") || !strings.Contains(v, "aten::matmul") {
		t.Errorf("regex filter on ops failed")
	}
	press(m, "esc")
	if m.pr.flt != nil {
		t.Errorf("esc should clear the filter")
	}
	press(m, "/")
	typeText(m, "(")
	press(m, "enter")
	if !strings.Contains(m.View(), "bad regular expression") {
		t.Errorf("bad regex should be reported")
	}
}

func TestParseFilter(t *testing.T) {
	f, err := parseFilter("size>10MiB stream=2 matmul|conv")
	if err != nil {
		t.Fatal(err)
	}
	if f.minSize != 10*mib+1 || f.stream != 2 || f.re == nil || !f.re.MatchString("aten::conv2d") {
		t.Fatalf("parsed %+v", f)
	}
	for _, bad := range []string{"size>lots", "stream=x", "size<3XB"} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("%q should fail", bad)
		}
	}
	if f, err := parseFilter("  "); f != nil || err != nil {
		t.Errorf("empty filter should be nil")
	}
}

func TestOpsSelectMovesCursor(t *testing.T) {
	m := small(t, 160, 48)
	press(m, "4", "down", "down", "enter")
	if m.Cursor() != t0+7500 || !m.p.ops.hl {
		t.Fatalf("enter on aten::matmul: cursor %d highlight %v", m.Cursor(), m.p.ops.hl)
	}
	if !strings.Contains(m.View(), "op aten::matmul") {
		t.Errorf("header should name the op at the cursor")
	}
	press(m, "s")
	if m.p.ops.sort != 1 || !strings.Contains(m.View(), "sort: duration") {
		t.Errorf("s should sort by duration")
	}
	press(m, "esc")
	if m.p.ops.hl {
		t.Errorf("esc should clear the op highlight")
	}
}

func TestSegmentBlockDetail(t *testing.T) {
	m := small(t, 160, 48)
	cmd := press(m, "2", "enter", "down")
	if cmd == nil {
		t.Fatalf("selecting a block should look up its allocation off the UI goroutine")
	}
	m.Update(cmd())
	v := m.View()
	for _, want := range []string{"block 0x7f0000800000", "allocated at 2025-11-29 07:06:40.002 (entry 2)", "forward  train.py:42", "main  train.py:7"} {
		if !strings.Contains(v, want) {
			t.Errorf("detail lacks %q:\n%s", want, v)
		}
	}
	if strings.Contains(v, "PyEval_EvalFrame") {
		t.Errorf("interpreter frames should be filtered")
	}
}

func TestHelpAndQuit(t *testing.T) {
	m := small(t, 120, 40)
	press(m, "?")
	v := m.View()
	for _, want := range []string{"npumon keys", "next OOM", "zoom in", "filter", "stream=N"} {
		if !strings.Contains(v, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	press(m, "esc")
	if m.vw.help.shown {
		t.Fatalf("esc should close help")
	}
	if !isQuit(press(m, "q")) {
		t.Fatalf("q should quit")
	}
	if !isQuit(press(small(t, 80, 24), "ctrl+c")) {
		t.Fatalf("ctrl+c should quit")
	}
}

func TestZoomAndPan(t *testing.T) {
	m := small(t, 120, 40)
	press(m, "g", "right", "right", "right", "right")
	press(m, "+")
	if !m.p.tl.zoomed || m.p.tl.win1-m.p.tl.win0 >= 8*tStep+1 {
		t.Fatalf("+ should zoom: %v [%d,%d)", m.p.tl.zoomed, m.p.tl.win0, m.p.tl.win1)
	}
	if m.cur.cursor < m.p.tl.win0 || m.cur.cursor >= m.p.tl.win1 {
		t.Fatalf("zoom must keep the cursor in view")
	}
	w0 := m.p.tl.win0
	press(m, ">")
	if m.p.tl.win0 <= w0 {
		t.Fatalf("> should pan right")
	}
	press(m, "-", "-", "-")
	if m.p.tl.zoomed {
		t.Fatalf("zooming out past the range should reset")
	}
	press(m, "+", "0")
	if m.p.tl.zoomed {
		t.Fatalf("0 should reset zoom")
	}
	press(m, "r")
	if !strings.Contains(m.View(), "+3.00ms") {
		t.Errorf("r should show relative time:\n%s", m.View())
	}
	// The initial state is just before the first entry, signed as such.
	press(m, "g")
	if v := m.View(); !strings.Contains(v, "│  -1µs  │") || strings.Contains(v, "+-") || !strings.Contains(v, "entry #–/9") {
		t.Errorf("g in relative mode:\n%s", v)
	}
}

// TestRelText: offsets from the first entry carry their own sign, in the
// header's units.
func TestRelText(t *testing.T) {
	for us, want := range map[int64]string{-1: "-1µs", 0: "+0µs", 619: "+619µs", 1240: "+1.24ms", 2_500_000: "+2.500s"} {
		if got := relText(us); got != want {
			t.Errorf("relText(%d) = %q, want %q", us, got, want)
		}
	}
}

// liveSource is a Store fed the small capture's entries over time, as a
// live producer feeds one (Store.Append).
type liveSource struct {
	*store.Store
	snap *snapshot.Snapshot
	full []snapshot.TraceEntry
	sent int
}

func newLiveSource() *liveSource {
	snap := smallSnapshot(true)
	return &liveSource{Store: store.New(store.Options{}), snap: snap, full: snap.DeviceTraces[0]}
}

// grow appends the entries up to the first n.
func (l *liveSource) grow(n int) {
	es := slices.Clone(l.full[l.sent:n])
	for i := range es {
		es[i].Frames = l.InternStack(l.snap.Stack(es[i].Frames))
	}
	l.Append(0, es)
	l.sent = n
}

func TestLiveFollowPauseAndConnState(t *testing.T) {
	ls := newLiveSource()
	ls.grow(5)
	o := testOptions(ls)
	o.Live = true
	o.SourceName = "pid 42 @ /tmp/npumon.sock"
	conn, connNote := wire.ConnConnected, ""
	o.ConnState = func() (wire.ConnState, string) { return conn, connNote }
	m := newSized(t, o, 120, 40)
	if !strings.Contains(m.View(), "LIVE") || m.Cursor() != t0+4*tStep {
		t.Fatalf("live should follow the newest entry: cursor %d\n%s", m.Cursor(), m.View())
	}
	ls.grow(7)
	m.Update(tickMsg(fixedNow))
	if m.Cursor() != t0+6*tStep {
		t.Fatalf("follow: cursor %d", m.Cursor())
	}
	press(m, "space")
	ls.grow(9)
	m.Update(tickMsg(fixedNow))
	v := m.View()
	if m.Cursor() != t0+6*tStep || !strings.Contains(v, "PAUSED") || !strings.Contains(v, "2.00ms behind (2 events)") {
		t.Fatalf("paused live should stay and say how far behind: cursor %d\n%s", m.Cursor(), v)
	}
	press(m, "f")
	if m.Cursor() != t0+8*tStep || !strings.Contains(m.View(), "LIVE") {
		t.Fatalf("f should follow again")
	}
	conn, connNote = wire.ConnReconnecting, "attempt 3" // polled on the next tick
	m.Update(tickMsg(fixedNow))
	if !strings.Contains(m.View(), "reconnecting attempt 3") {
		t.Errorf("conn state not in header:\n%s", m.View())
	}
}

func TestLoadingAnswersKeys(t *testing.T) {
	o := testOptions(store.New(store.Options{})) // nothing loaded yet
	started := make(chan struct{})
	o.Load = func(ctx context.Context, report func(Progress)) error {
		report(Progress{Stage: "decoding", BytesDone: 3 * mib, BytesTotal: 12 * mib, Entries: 4200})
		close(started)
		<-ctx.Done() // a huge file: never finishes on its own
		return ctx.Err()
	}
	m := New(o)
	cmds := m.Init()
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	// Run the batch: the loader is one of its commands; run it in the background.
	done := make(chan tea.Msg, 4)
	for _, c := range cmds().(tea.BatchMsg) {
		go func() { done <- c() }()
	}
	<-started
	m.Update(tickMsg(fixedNow))
	v := m.View()
	for _, want := range []string{"decoding small.pickle", "25%  3.00 MiB of 12.0 MiB  4200 entries"} {
		if !strings.Contains(v, want) {
			t.Errorf("loading screen lacks %q:\n%s", want, v)
		}
	}
	if !isQuit(press(m, "q")) {
		t.Fatalf("q must quit while loading")
	}
	for {
		if msg := <-done; msg != nil {
			if ld, ok := msg.(loadDoneMsg); ok {
				if !errors.Is(ld.err, context.Canceled) {
					t.Fatalf("quitting should cancel the loader, got %v", ld.err)
				}
				break
			}
		}
	}
}

func TestLoadErrorShown(t *testing.T) {
	o := testOptions(storeOf(t, smallSnapshot(true), nil))
	o.Load = func(context.Context, func(Progress)) error { return errors.New("x.pickle: offset 12: truncated") }
	m := New(o)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	m.Update(loadDoneMsg{err: o.Load(nil, nil)})
	if v := m.View(); !strings.Contains(v, "error: x.pickle: offset 12: truncated") {
		t.Fatalf("load error not shown:\n%s", v)
	}
	if m.Err() == nil {
		t.Fatalf("Err should return the load error")
	}
}

func TestViewIsCachedUntilSomethingChanges(t *testing.T) {
	m := small(t, 120, 40)
	a := m.View()
	if m.dirty {
		t.Fatal("view should be clean after rendering")
	}
	m.Update(tickMsg(fixedNow))
	if m.dirty {
		t.Fatal("an idle tick must not force a redraw")
	}
	press(m, "left")
	if b := m.View(); b == a {
		t.Fatal("cursor move should change the view")
	}
}

func TestASCIIModeIsPureASCII(t *testing.T) {
	o := testOptions(storeOf(t, smallSnapshot(true), smallOps()))
	o.ASCII = true
	m := newSized(t, o, 120, 40)
	for _, keys := range [][]string{{}, {"2", "enter", "down"}, {"?"}, {"esc", "r"}} {
		press(m, keys...)
		v := m.View()
		checkFrame(t, v, 120, 40)
		for i, r := range v {
			if r >= 0x80 {
				t.Fatalf("after %v: non-ASCII %q at byte %d:\n%s", keys, r, i, v)
			}
		}
	}
	if v := m.View(); !strings.Contains(v, "PAUSED x1") || !strings.Contains(v, "#") {
		t.Errorf("ascii view:\n%s", v)
	}
}

func TestOpsOnlySource(t *testing.T) {
	st := store.New(store.Options{})
	st.IngestOps(smallOps())
	m := newSized(t, testOptions(st), 160, 48)
	v := m.View()
	for _, want := range []string{"no allocator trace in this source", "aten::matmul", "2025-11-29 07:06:40.009"} {
		if !strings.Contains(v, want) {
			t.Errorf("ops-only view lacks %q:\n%s", want, v)
		}
	}
	press(m, "4", "down", "enter")
	if m.Cursor() != t0+500 {
		t.Fatalf("enter on an op should move the cursor: %d", m.Cursor())
	}
	checkFrame(t, m.View(), 160, 48)
}

func TestBurstOfKeysInOneMessage(t *testing.T) {
	m := small(t, 160, 48)
	// A terminal read can deliver "/" and the filter text in one message.
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/matmul")})
	press(m, "enter")
	if m.pr.flt == nil || m.pr.flt.text != "matmul" {
		t.Fatalf("filter from a burst: %+v", m.pr.flt)
	}
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("g2")})
	if m.Cursor() != t0-1 || m.p.focus != paneSegments {
		t.Fatalf("burst g2: cursor %d focus %v", m.Cursor(), m.p.focus)
	}
	if !isQuit(func() tea.Cmd { _, c := m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("xq")}); return c }()) {
		t.Fatalf("q inside a burst must quit")
	}
}

func TestEscThenKeyReadAsAlt(t *testing.T) {
	m := small(t, 160, 48)
	press(m, "/")
	typeText(m, "matmul")
	press(m, "enter")
	// "ESC 2" arriving in one read is decoded as alt+2.
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("2"), Alt: true})
	if m.pr.flt != nil || m.p.focus != paneSegments {
		t.Fatalf("alt+2 should be esc then 2: filter %v focus %v", m.pr.flt, m.p.focus)
	}
}

// TestStreamLabels: streams are s0, s1, … in order of first appearance in
// the trace, streams the trace never used follow as seen; labels resolve
// back; details show the full handle.
func TestStreamLabels(t *testing.T) {
	var l streamLabels
	l.reset([]uint64{93939793133632, 0, 7})
	for s, want := range map[uint64]string{93939793133632: "s0", 0: "s1", 7: "s2"} {
		if got := l.label(s); got != want {
			t.Errorf("label(%d) = %q, want %q", s, got, want)
		}
	}
	if got := l.label(42); got != "s3" || l.width() != 2 {
		t.Errorf("a segment-only stream: %q, width %d", got, l.width())
	}
	if s, ok := l.lookup("S0"); !ok || s != 93939793133632 {
		t.Errorf("lookup(S0) = %d, %v", s, ok)
	}
	if _, ok := l.lookup("s9"); ok {
		t.Error("lookup(s9) found a stream")
	}
	if got := l.describe(93939793133632); got != "s0 (0x557010000040)" {
		t.Errorf("describe = %q", got)
	}
	if got := l.describe(7); got != "s2 (7)" {
		t.Errorf("describe = %q", got)
	}
	for range 8 {
		l.label(uint64(1000 + len(l.ids)))
	}
	if l.width() != 3 { // s0 … s11
		t.Errorf("width with 12 streams = %d", l.width())
	}
}

// A stream filter takes the label or the full id.
func TestFilterStream(t *testing.T) {
	var l streamLabels
	l.reset([]uint64{93939793133632, 7})
	e := store.Event{}
	e.Size, e.Stream = 1<<20, 7
	for i, tc := range []struct {
		text string
		want bool
	}{
		{"stream=s1", true}, {"stream=S1", true}, {"stream=s0", false}, {"stream=7", true}, {"stream=0x7", true},
		{"stream=93939793133632", false},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f, err := parseFilter(tc.text)
			if err != nil {
				t.Fatalf("%s: %v", tc.text, err)
			}
			if got := f.matchEvent(&e, &l, func() string { return "" }); got != tc.want {
				t.Errorf("%s matches = %v", tc.text, got)
			}
		})
	}
	if _, err := parseFilter("stream=sx"); err == nil {
		t.Error("stream=sx accepted")
	}
}

// TestHeaderKeepsStateAndTime: a long source name (a watched directory and
// its capture) gives way from the left; the time, the state and the entry
// stay on screen at every width.
func TestHeaderKeepsStateAndTime(t *testing.T) {
	for _, w := range []int{80, 100, 120, 160} {
		o := testOptions(storeOf(t, smallSnapshot(true), smallOps()))
		o.SourceName = "/data/jobs/llama-70b-pretrain/run-2026-11-30/rank3/memory_dumps · snapshot_rank3_step1200_oom.pickle (12 of 12)"
		m := newSized(t, o, w, 30)
		lines := strings.Split(m.View(), "\n")
		if !strings.Contains(lines[0], "PAUSED ×1") || !strings.Contains(lines[0], "…") || !strings.Contains(lines[0], "(12 of 12)") {
			t.Errorf("width %d: header line 1 %q", w, lines[0])
		}
		if !strings.Contains(lines[1], "entry #8/9") {
			t.Errorf("width %d: header line 2 %q", w, lines[1])
		}
	}
}

// selectedOp is the op table's selected row.
func selectedOp(t *testing.T, m *Model) string {
	t.Helper()
	v := m.View()
	ops := v[strings.Index(v, "4 Ops"):]
	for _, l := range strings.Split(ops, "\n") {
		if strings.Contains(l, "▶") {
			return l
		}
	}
	t.Fatalf("no selected op:\n%s", v)
	return ""
}

// TestOpsFollowTheCursor: the op table selects the op at the cursor as the
// cursor moves; enter on an op moves the cursor to it and keeps it selected.
func TestOpsFollowTheCursor(t *testing.T) {
	m := small(t, 160, 48)
	for i, tc := range []struct{ at, want string }{
		{"+1ms", "aten::empty"}, {"+8ms", "aten::matmul"}, {"+5ms", "ProfilerStep#1"}, {"+2ms", "aten::empty"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			press(m, "t")
			typeText(m, tc.at)
			press(m, "enter")
			if l := selectedOp(t, m); !strings.Contains(l, tc.want) {
				t.Errorf("cursor at %s: selected op %q, want %s", tc.at, l, tc.want)
			}
		})
	}
	press(m, "4", "down", "down") // matmul
	press(m, "enter")
	if l := selectedOp(t, m); !strings.Contains(l, "aten::matmul") || m.Cursor() != t0+7500 {
		t.Errorf("enter on matmul: cursor %d, selected %q", m.Cursor()-t0, l)
	}
	press(m, "up", "up", "enter") // the step, which starts at the first entry
	if l := selectedOp(t, m); !strings.Contains(l, "ProfilerStep#1") || m.Cursor() != t0 {
		t.Errorf("enter on the step: cursor %d, selected %q", m.Cursor()-t0, l)
	}
}

// TestHelpScrolls: at 80×24 the help does not fit; the hint says so and the
// keys scroll it to the filter and jump syntax.
func TestHelpScrolls(t *testing.T) {
	m := small(t, 80, 24)
	press(m, "?")
	v := m.View()
	if !strings.Contains(v, "npumon keys") || !strings.Contains(v, "pgup/pgdn scroll") || strings.Contains(v, "Jump (t)") {
		t.Fatalf("help at 80×24:\n%s", v)
	}
	press(m, "end")
	if v := m.View(); !strings.Contains(v, "Jump (t)") || !strings.Contains(v, "Glyphs:") || strings.Contains(v, "npumon keys") {
		t.Fatalf("help scrolled to the end:\n%s", v)
	}
	press(m, "pgup", "pgup", "pgup", "pgup", "pgup")
	if v := m.View(); !strings.Contains(v, "npumon keys") {
		t.Fatalf("help back at the top:\n%s", v)
	}
	press(m, "esc", "?")
	if v := m.View(); !strings.Contains(v, "npumon keys") {
		t.Fatalf("help reopens at the top:\n%s", v)
	}
}

// TestFilterMatchesNextPrev: with a filter on, n and N move the cursor to
// the next and previous matching entry.
func TestFilterMatchesNextPrev(t *testing.T) {
	m := small(t, 160, 48)
	press(m, "n")
	if !strings.Contains(m.View(), "set a filter with / first") {
		t.Fatalf("n without a filter says nothing:\n%s", m.View())
	}
	press(m, "/")
	typeText(m, "^alloc$")
	press(m, "enter", "g")
	// small's allocs are entries 1, 2, 4 and 8.
	for _, want := range []string{"entry #1/9", "entry #2/9", "entry #4/9", "entry #8/9"} {
		press(m, "n")
		if v := m.View(); !strings.Contains(v, want) {
			t.Fatalf("n: want %s:\n%s", want, v)
		}
	}
	press(m, "n")
	if v := m.View(); !strings.Contains(v, "no more entries match") || !strings.Contains(v, "entry #8/9") {
		t.Fatalf("n past the last match:\n%s", v)
	}
	for _, want := range []string{"entry #4/9", "entry #2/9", "entry #1/9"} {
		press(m, "N")
		if v := m.View(); !strings.Contains(v, want) {
			t.Fatalf("N: want %s:\n%s", want, v)
		}
	}
	// In the events pane ↓/↑ go from match to match too.
	press(m, "3", "down")
	if v := m.View(); !strings.Contains(v, "entry #2/9") {
		t.Fatalf("↓ in the events pane with a filter:\n%s", v)
	}
	press(m, "down", "up")
	if v := m.View(); !strings.Contains(v, "entry #2/9") {
		t.Fatalf("↓↑ in the events pane with a filter:\n%s", v)
	}
}

// TestListPaging: PgDn/PgUp/Home/End page and jump in the segment and op
// lists; in the events pane they move the cursor.
func TestListPaging(t *testing.T) {
	m := newSized(t, fixtureOptions(fixtureSource(t)), 120, 40)
	press(m, "2", "end")
	if s := m.p.seg.seg.Segment(); s == nil || s.Address != 0xe1ee00000 && !strings.Contains(m.View(), "▶") {
		t.Fatalf("end in segments: %+v", s)
	}
	last := m.p.seg.seg.Segment().Address
	press(m, "home")
	first := m.p.seg.seg.Segment().Address
	press(m, "pgdown")
	paged := m.p.seg.seg.Segment().Address
	if !(first < paged && paged < last) {
		t.Fatalf("segments: first %#x, after pgdn %#x, last %#x", first, paged, last)
	}
	press(m, "3", "home")
	if v := m.View(); !strings.Contains(v, "entry #–/5163") {
		t.Fatalf("home in events:\n%s", v)
	}
	press(m, "pgdown")
	if m.Summary().Applied < 5 {
		t.Fatalf("pgdn in events moved to %d", m.Summary().Applied)
	}
}

// TestKeysSayWhy: keys that do nothing in a mode say why.
func TestKeysSayWhy(t *testing.T) {
	m := small(t, 160, 48)
	for key, want := range map[string]string{
		"c": "captures of a watched directory", "f": "f follows a live source", "s": "s sorts the segments",
		"w": "what-if needs a snapshot", "d": "only one device",
	} {
		press(m, "1", key)
		if v := m.View(); !strings.Contains(v, want) {
			t.Errorf("%s: want %q:\n%s", key, want, v)
		}
	}
}

// TestMouse: a click on the timeline moves the cursor to the time under it
// and focuses the pane; a click on a list row selects it; the wheel zooms the
// timeline and scrolls lists.
func TestMouse(t *testing.T) {
	m := newSized(t, fixtureOptions(fixtureSource(t)), 160, 48)
	_, tl, seg, _, _ := m.layout()
	click := func(x, y int) {
		m.Update(tea.MouseMsg{X: x, Y: y, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	}
	// The middle of the chart is the middle of the trace.
	press(m, "2")
	click(tl.x+6+(tl.w-6)/2, tl.y+3)
	first, last := int64(1776479641085368), int64(1776479641333549)
	if m.p.focus != paneTimeline || m.Cursor() < first+(last-first)*2/5 || m.Cursor() > first+(last-first)*3/5 {
		t.Fatalf("click mid-timeline: focus %v, cursor %d in [%d, %d]", m.p.focus, m.Cursor(), first, last)
	}
	click(seg.x+3, seg.y+2+4) // the fifth segment line
	if m.p.focus != paneSegments || m.p.seg.seg.Segment() == nil || m.p.seg.seg.Segment().Address != 0xb09600000 {
		t.Fatalf("click on a segment row: focus %v, %+v", m.p.focus, m.p.seg.seg.Segment())
	}
	m.Update(tea.MouseMsg{X: seg.x + 3, Y: seg.y + 4, Button: tea.MouseButtonWheelDown, Action: tea.MouseActionPress})
	if m.p.seg.seg.Segment().Address == 0xb09600000 {
		t.Fatal("wheel did not scroll the segments")
	}
	m.Update(tea.MouseMsg{X: tl.x + 40, Y: tl.y + 3, Button: tea.MouseButtonWheelUp, Action: tea.MouseActionPress})
	if !m.p.tl.zoomed {
		t.Fatal("wheel up on the timeline did not zoom in")
	}
}
