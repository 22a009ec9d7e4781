package tui

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/tui/segmap"
	"github.com/npumon/npumon/tui/theme"
	"github.com/npumon/npumon/tui/timeline"
	tuiwhatif "github.com/npumon/npumon/tui/whatif"
)

type pane int

const (
	paneTimeline pane = iota
	paneSegments
	paneEvents
	paneOps
	numPanes
)

var paneNames = [numPanes]string{"Timeline", "Segments", "Events", "Ops"}

type inputMode int

const (
	inputNone inputMode = iota
	inputFilter
	inputJump
)

// Internal messages.
type (
	tickMsg     time.Time
	loadDoneMsg struct{ err error }
	allocAtMsg  struct {
		dev    int
		addr   uint64
		cursor int64
		text   string
	}
)

// speeds are the replay speeds `[` and `]` step through, MinSpeed to MaxSpeed.
var speeds = []float64{MinSpeed, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, MaxSpeed}

// MinSpeed and MaxSpeed bound the replay speed (Options.Speed).
const (
	MinSpeed float64 = 0.01
	MaxSpeed float64 = 1024
)

// seqRate is how many entries per second playback advances at ×1 when the
// source has no timestamps.
const seqRate = 20

// Model is the root Bubble Tea model: routing (keys go down keyRoute,
// keyroute.go), layout, and its components, each owning its own state
// (TestModelHoldsRouting keeps it that way). All Source queries are
// bounded (the Store's seek is O(log n + K)), so Update never waits on
// ingestion.
type Model struct {
	o    Options
	th   *theme.Theme
	keys keyMap
	p    mainPanes // the main screen's panes and which has the focus

	w, h int

	ld  loader      // the loader's progress, result and cancel
	d   dataShape   // what the Source holds for the device shown
	cur cursorState // the one cursor, playback and following
	at  atCursor    // the Source's answers at the cursor
	sl  statusLine  // the status line's note and the connection
	pr  prompt      // the filter / time prompt and the filter set

	vw views // the full-screen views over the panes

	frame string // cached View
	dirty bool
}

// views are the full-screen views that replace the panes, in the order
// screen() gives them precedence.
type views struct {
	help helpView   // the help screen (?) and the hint line's short help
	dev  devView    // the host's devices (D)
	pick picker     // capture picker (Options.Captures)
	wi   whatIfView // the what-if view (w)
	x    explainUI  // holders, stack and OOM views (explain.go)
}

// mainPanes are the main screen's four panes (panes.go; Model.panels
// lists them in pane order) and the one with the focus.
type mainPanes struct {
	tl    *timelinePanel // also the timeline's window (zoom) and chart kind
	seg   *segmentsPanel
	ev    *eventsPane
	ops   *opsPane
	focus pane
}

// loader is the state of Options.Load: running, its progress (reported
// from the loader's goroutine), its error, and how to stop it. While it
// runs, what the Source already holds is shown (as less pages a file still
// being read) unless the run is headless, which waits for all of it.
type loader struct {
	loading  bool
	loadErr  error
	progMu   sync.Mutex
	prog     Progress
	cancel   context.CancelFunc
	closeOne sync.Once
	headless time.Duration // RunHeadless: quit this long after loading
	whole    bool          // RunHeadless: show nothing until the load ends

	samples []loadSample // progress at recent ticks: the rate (progress.go)
	drawn   string       // the progress line last drawn: redraw when it changes
}

// dataShape is the shape of the data for the device shown: the devices,
// the time base and bounds, the retention window, the stream labels.
// refreshData and readBounds set it; everything else reads it.
type dataShape struct {
	version   uint64
	devices   []int
	dev       int
	base      store.TimeBase
	first     int64
	last      int64
	n         int64
	thinned   int64 // entries before the Source's retention window (retain.go)
	detail    int64 // the cursor of the earliest position held in detail (thinned > 0)
	hasData   bool
	streams   streamLabels     // the device's stream labels (s0, s1, …)
	devCursor map[int][2]int64 // cursor and position of each device when last shown (d)
}

// cursorState is the one cursor every pane reads (paneCtx), and how it
// moves by itself: playback of a replay, following a live source.
type cursorState struct {
	cursor   int64
	pos      int64 // entries applied when the cursor was set by position (event stepping, Source.StateAtSeq); -1: all entries at cursor's time
	follow   bool  // live: cursor tracks the newest entry
	playing  bool
	speed    float64
	lastTick time.Time
	carry    float64 // fractional playback advance
	relative bool    // times shown relative to the first entry (r)
}

// atCursor caches the Source's answers at the cursor (refreshCursor).
type atCursor struct {
	sum      store.Summary
	opAt     store.Op
	hasOpAt  bool
	oomAhead bool // an oom entry after the cursor (with sum.OOMs: the source has one)
}

// statusLine is the hint line's note (cleared by the next key) and the
// live connection's state the header shows.
type statusLine struct {
	err      string
	conn     wire.ConnState
	connNote string
}

// prompt is the bottom line's text entry (/ filter, t jump to time) and
// the filter it set.
type prompt struct {
	input inputMode
	ti    textinput.Model
	flt   *filter
}

// whatIfView is the what-if view (w) and whether it is open.
type whatIfView struct {
	v    tuiwhatif.Model
	open bool
}

func newModel(o Options) *Model {
	th := theme.New(o.Renderer, o.ASCII, o.NoColor)
	ti := textinput.New()
	ti.Prompt = ""
	ti.CharLimit = 200
	m := &Model{
		o: o, th: th, keys: newKeyMap(), pr: prompt{ti: ti},
		cur:   cursorState{speed: o.Speed, playing: o.Play, relative: o.Relative, follow: o.Live, pos: -1},
		d:     dataShape{dev: o.Device},
		ld:    loader{loading: o.Load != nil},
		dirty: true,
		vw:    views{wi: whatIfView{v: tuiwhatif.New(th)}, x: newExplainUI()},
	}
	m.p.tl = &timelinePanel{tl: timeline.New(th)}
	m.p.seg = &segmentsPanel{seg: segmap.New(th)}
	m.p.ev = newEventsPane()
	m.p.ops = &opsPane{}
	m.vw.wi.v.Keys = m.keys.WhatIfView // the bindings help lists are the ones the view matches
	m.vw.help = newHelpView(th, o, m.p.seg.seg.Legend())
	m.vw.dev = newDevView(o)
	return m
}

// Init starts the loader (if any) and the tick.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.tick()}
	if m.o.Load != nil {
		m.ld.sample(m.o.Now()) // the rate counts from the start
		cmds = append(cmds, m.ld.start(m.o.Load))
		m.pollData() // what loaded before the UI opened (cmd's preload) shows at once, not a tick later
	} else {
		m.refreshData()
		cmds = append(cmds, m.headlessTimer())
	}
	m.refreshDevices(true)
	return tea.Batch(cmds...)
}

// Close stops a running loader.
func (m *Model) Close() { m.ld.close() }

// start runs load off the UI goroutine; its end is a loadDoneMsg.
func (l *loader) start(load func(context.Context, func(Progress)) error) tea.Cmd {
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	return func() tea.Msg { return loadDoneMsg{err: load(ctx, l.report)} }
}

// close stops the loader, once.
func (l *loader) close() {
	l.closeOne.Do(func() {
		if l.cancel != nil {
			l.cancel()
		}
	})
}

// report is the loader's progress callback (any goroutine).
func (l *loader) report(p Progress) {
	l.progMu.Lock()
	l.prog = p
	l.progMu.Unlock()
}

func (l *loader) progress() Progress {
	l.progMu.Lock()
	defer l.progMu.Unlock()
	return l.prog
}

func (m *Model) tick() tea.Cmd {
	return tea.Tick(m.o.Tick, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Cursor returns the cursor (for tests and headless runs).
func (m *Model) Cursor() int64 { return m.cur.cursor }

// Device returns the device shown.
func (m *Model) Device() int { return m.d.dev }

// Summary returns the summary at the cursor.
func (m *Model) Summary() store.Summary { return m.at.sum }

// Playing reports whether replay is playing.
func (m *Model) Playing() bool { return m.cur.playing }

// Loading reports whether the loader is still running.
func (m *Model) Loading() bool { return m.ld.loading }

// Err returns the load error, if any.
func (m *Model) Err() error { return m.ld.loadErr }

// Update handles one message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	defer m.settle()
	if handled, cmd := m.updateWhatIf(msg); handled {
		return m, cmd
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		m.layoutPanes()
		m.refreshWindow()
		m.dirty = true
	case tickMsg:
		m.onTick(time.Time(msg))
		return m, m.tick()
	case loadDoneMsg:
		m.ld.loading = false
		m.ld.loadErr = msg.err
		m.dirty = true
		if msg.err != nil {
			// What was shown stays, under the error (screen, hintLine).
			if m.ld.headless > 0 {
				return m, tea.Quit
			}
			return m, nil
		}
		m.refreshData() // a cursor following the loaded end goes to the end
		if !m.o.Live {
			m.cur.follow = false
		}
		return m, m.headlessTimer()
	case headlessQuitMsg:
		m.pollData() // the summary is of the newest data (a live source may have just ended)
		return m, tea.Quit
	case pickerOpenedMsg:
		m.onPickerOpened(msg)
	case allocAtMsg:
		if msg.dev == m.d.dev && msg.cursor == m.cur.cursor {
			m.p.seg.setAllocAt(msg.addr, msg.text)
			m.dirty = true
		}
	case tea.MouseMsg:
		return m, m.onMouse(msg)
	case tea.KeyMsg:
		if msg.Alt && msg.Type == tea.KeyRunes {
			// No alt bindings: "ESC x" read together is esc, then x.
			c1 := m.route(tea.KeyMsg{Type: tea.KeyEsc})
			msg.Alt = false
			_, c2 := m.Update(msg)
			return m, tea.Batch(c1, c2)
		}
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed faster than the terminal is read arrive as one
			// message ("/size>1MiB"): handle them one by one, so a key
			// that opens a prompt hands the rest to the prompt.
			var cmds []tea.Cmd
			for _, r := range msg.Runes {
				cmds = append(cmds, m.route(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}}))
			}
			return m, tea.Batch(cmds...)
		}
		return m, m.route(msg)
	}
	return m, nil
}

func (m *Model) onTick(now time.Time) {
	if m.o.ConnState != nil {
		c, d := m.o.ConnState()
		if c != m.sl.conn || d != m.sl.connNote {
			m.sl.conn, m.sl.connNote = c, d
			m.dirty = true
		}
	}
	m.refreshDevices(false)
	if m.ld.loading {
		m.ld.sample(m.o.Now())
		if l := m.progressLine(1<<10, true); l != m.ld.drawn {
			m.ld.drawn = l
			m.dirty = true // the progress line changed: one redraw a tick at most
		}
		if m.ld.whole {
			return
		}
	} else {
		m.syncHold()
		if m.refreshPicker() {
			m.dirty = true // new captures, or another one opened
		}
	}
	m.pollData()
	if step := m.cur.advance(m.o.Now(), m.d.hasData, m.d.base); step > 0 {
		c := m.cur.cursor + step
		if c >= m.d.last {
			c = m.d.last
			if !m.ld.loading { // still loading: play on as more lands
				m.cur.playing = false
			}
		}
		m.setCursor(c)
	}
}

// growing reports whether the Source's end moves while shown: a live
// source, or a file still loading. The cursor can follow that end (follow).
func (m *Model) growing() bool { return m.o.Live || m.ld.loading }

// advance is how far playback moves the cursor between the last tick and
// wall (whole units of the time base; the fraction carries over).
func (c *cursorState) advance(wall time.Time, hasData bool, base store.TimeBase) int64 {
	var step int64
	if c.playing && hasData && !c.lastTick.IsZero() {
		dt := wall.Sub(c.lastTick).Seconds() * c.speed
		if base == store.TimeSequence {
			dt *= seqRate
		} else {
			dt *= 1e6
		}
		c.carry += dt
		step = int64(c.carry)
		c.carry -= float64(step)
	}
	c.lastTick = wall
	return step
}

// pollData refreshes everything when the Source's version moved.
func (m *Model) pollData() {
	if m.ld.loading && m.ld.whole || m.o.Source == nil {
		return
	}
	if v := m.o.Source.Version(); v != m.d.version || !m.d.hasData {
		m.refreshData()
	}
}

// refreshData re-reads the shape of the data: devices, bounds, ops.
func (m *Model) refreshData() {
	src := m.o.Source
	if src == nil {
		return
	}
	m.d.version = src.Version()
	m.d.devices = src.Devices()
	m.p.ops.refresh(m.paneCtx())
	if len(m.d.devices) == 0 && m.p.ops.count() == 0 {
		m.d.hasData = false
		m.dirty = true
		return
	}
	switch {
	case len(m.d.devices) == 0:
		m.d.dev = -1 // ops only (e.g. analysed profiler output without a trace)
	case !slices.Contains(m.d.devices, m.d.dev):
		m.d.dev = m.d.devices[0]
	}
	wasData := m.d.hasData
	if m.d.dev >= 0 {
		m.d.streams.reset(src.Streams(m.d.dev))
	}
	m.p.seg.seg.Stream = m.d.streams.describe
	m.readBounds()
	switch {
	case !wasData && !m.o.Live:
		// A replay opens at the end (the state the file was dumped in),
		// or at the initial state when asked to play.
		m.cur.cursor, m.cur.pos = m.d.first-1, -1
		if (m.d.n > 0 || m.d.dev < 0) && !m.cur.playing {
			m.cur.cursor = m.d.last
			// Still loading: the end is where the loaded part ends, and
			// the cursor stays at it until moved (follow).
			m.cur.follow = m.ld.loading
		}
	case m.cur.follow:
		m.cur.cursor, m.cur.pos = m.d.last, -1
	}
	if m.cur.pos > m.d.n {
		m.cur.pos = -1 // the log was replaced
	}
	if m.cur.pos >= 0 && m.cur.pos < m.d.thinned {
		m.cur.pos = m.d.thinned // the window moved past the cursor
	}
	m.cur.cursor = m.clampCursor(m.cur.cursor)
	m.refreshWindow()
	m.refreshCursor()
}

// startOver shows the Source as new data: at its end, or following it when
// live; zoom and the op highlight go, the filter and focus stay.
func (m *Model) startOver() {
	m.d.hasData, m.cur.pos, m.cur.follow = false, -1, m.o.Live
	m.p.tl.zoomed = false
	m.p.ops.unhighlight()
	m.vw.x = newExplainUI() // views, mark and holders belong to the old data
	m.p.tl.tl.SetHighlight(0, 0, false)
	m.refreshData()
	m.dirty = true
}

const (
	minInt64 = -1 << 63
	maxInt64 = 1<<63 - 1
)

func (m *Model) readBounds() {
	src := m.o.Source
	m.d.hasData = true
	if m.d.dev < 0 {
		m.d.base, m.d.n = store.TimeEpochUS, 0
		m.d.first, m.d.last = m.p.ops.bounds()
		return
	}
	m.d.base = src.TimeBase(m.d.dev)
	m.d.first, m.d.last = src.Bounds(m.d.dev)
	m.d.n = src.Len(m.d.dev)
	ri := src.Retained(m.d.dev)
	m.d.thinned, m.d.detail = ri.Thinned, ri.DetailFrom
}

// clampCursor keeps c in [first−1, last]; first−1 is the initial state.
// Before a retention window's start the detail is gone: the cursor stops
// at the window's first position (the timeline still draws the series).
func (m *Model) clampCursor(c int64) int64 {
	lo := m.d.first - 1
	if m.d.thinned > 0 {
		lo = m.d.detail
	}
	return max(lo, min(c, m.d.last))
}

func (m *Model) setCursor(c int64) {
	if m.d.thinned > 0 && c < m.d.detail {
		m.sl.err = "detail before " + m.timeFmt().clock(m.d.detail) + " was thinned (--retain); the timeline keeps its series"
	}
	c = m.clampCursor(c)
	if c == m.cur.cursor && m.cur.pos < 0 {
		return
	}
	m.cur.cursor, m.cur.pos = c, -1
	if m.growing() && c < m.d.last {
		m.cur.follow = false
	}
	m.refreshCursor()
}

// stepEvent moves the cursor to the previous (d < 0) or next entry, one
// entry at a time even inside a microsecond. Without entries (ops only, or
// an empty log) it moves to the previous or next time that has one.
func (m *Model) stepEvent(d int) {
	src := m.o.Source
	if m.d.dev >= 0 && m.d.n > 0 {
		n := m.at.sum.Applied + int64(d)
		if n < m.d.thinned {
			m.sl.err = "detail before " + m.timeFmt().clock(m.d.detail) + " was thinned (--retain)"
			return
		}
		if n < 0 || n > m.d.n {
			return
		}
		m.cur.pos = n
		if m.growing() && n < m.d.n {
			m.cur.follow = false
		}
		m.refreshCursor()
		return
	}
	if d < 0 {
		if c, ok := src.PrevEvent(m.d.dev, m.cur.cursor); ok {
			m.setCursor(c)
		} else {
			m.setCursor(m.d.first - 1)
		}
	} else if c, ok := src.NextEvent(m.d.dev, m.cur.cursor); ok {
		m.setCursor(c)
	}
}

// refreshWindow recomputes the timeline window and its series.
func (m *Model) refreshWindow() {
	if !m.d.hasData || m.w == 0 {
		return
	}
	m.p.tl.settle(m.d.first, m.d.last)
	cols := m.p.tl.tl.Columns()
	s := m.o.Source.Series(m.d.dev, m.p.tl.win0, m.p.tl.win1, cols)
	var marks []timeline.Marker
	t := m.p.tl.win0 - 1
	for range 512 {
		nt, ok := m.o.Source.Next(m.d.dev, t, snapshot.ActionOOM)
		if !ok || nt >= m.p.tl.win1 || nt <= t {
			break
		}
		marks = append(marks, timeline.Marker{T: nt, Kind: timeline.MarkOOM})
		t = nt
	}
	for _, act := range []snapshot.Action{store.ActionRestart, store.ActionResync} {
		t := m.p.tl.win0 - 1
		for range 64 {
			nt, ok := m.o.Source.Next(m.d.dev, t, act)
			if !ok || nt >= m.p.tl.win1 || nt <= t {
				break
			}
			marks = append(marks, timeline.Marker{T: nt, Kind: timeline.MarkRestart})
			t = nt
		}
	}
	if m.d.base == store.TimeEpochUS {
		for _, t := range m.p.ops.stepStarts(m.p.tl.win0, m.p.tl.win1) {
			marks = append(marks, timeline.Marker{T: t, Kind: timeline.MarkStep})
		}
	}
	m.p.tl.tl.Origin = m.d.first
	m.p.tl.tl.Unit = 1
	if m.d.base == store.TimeEpochUS {
		m.p.tl.tl.Unit = 1e6
	}
	tf := m.timeFmt()
	tf.span = m.p.tl.span()
	m.p.tl.tl.XLabel = tf.axis
	m.setCategoryStack(cols)
	m.p.tl.tl.SetData(s, marks)
	m.p.tl.tl.SetCursor(m.cur.cursor)
	m.dirty = true
}

func (m *Model) timeFmt() timeFmt {
	return timeFmt{base: m.d.base, first: m.d.first, relative: m.cur.relative, loc: m.o.Location}
}

// refreshCursor re-queries everything that depends on the cursor.
func (m *Model) refreshCursor() {
	if !m.d.hasData {
		return
	}
	src := m.o.Source
	if m.cur.pos >= 0 {
		m.at.sum = src.SummaryAtSeq(m.d.dev, m.cur.pos)
		m.cur.cursor = m.at.sum.Cursor
		m.p.seg.seg.SetState(src.StateAtSeq(m.d.dev, m.cur.pos))
	} else {
		m.at.sum = src.Summary(m.d.dev, m.cur.cursor)
		m.p.seg.seg.SetState(src.StateAt(m.d.dev, m.cur.cursor))
	}
	_, m.at.oomAhead = src.Next(m.d.dev, m.cur.cursor, snapshot.ActionOOM)
	m.at.hasOpAt = false
	if m.d.base == store.TimeEpochUS {
		m.at.opAt, m.at.hasOpAt = src.OpAt(m.cur.cursor)
		// Standing right after an entry whose time is only an interval
		// (a recovered trace's oom), the header names that entry's op, as
		// explain does (oprange.Interval).
		if m.cur.pos > 0 {
			if evs := src.EventsAroundSeq(m.d.dev, m.cur.pos, 1, 0); len(evs) == 1 && evs[0].Interval {
				m.at.opAt, m.at.hasOpAt = src.OpOf(evs[0])
			}
		}
	}
	m.p.ops.follow(m.paneCtx(), m.at.opAt, m.at.hasOpAt)
	m.loadEvents()
	m.p.tl.tl.SetCursor(m.cur.cursor)
	if m.p.tl.keepInView(m.cur.cursor) {
		m.refreshWindow()
	}
	m.p.seg.clearAllocAt()
	m.dirty = true
}

// loadEvents has the events pane fetch the trace around the cursor, as
// many entries as its rect shows.
func (m *Model) loadEvents() {
	_, _, _, ev, _ := m.layout()
	m.p.ev.load(m.paneCtx(), max(1, ev.h-2))
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

// settle keeps what the full-screen views show in range once a message
// has changed something (a key, new data, a resize): the holders at the
// cursor, selections and scroll offsets. View only draws.
func (m *Model) settle() {
	if !m.dirty {
		return
	}
	m.vw.x.settleView(m.paneCtx())
	m.vw.dev.settle(m.paneCtx())
}
