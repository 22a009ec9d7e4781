package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/tui/segmap"
	"github.com/npumon/npumon/tui/timeline"
)

// panel is the one contract of the main screen's four panes (timeline,
// segments, events, ops). Each is sized by the layout, takes the keys that
// act inside the focused pane, draws its body and names its own keys for
// help. A pane owns its state; it gets the shared context (paneCtx: theme,
// keys, Source, device, the cursor) rather than the Model, and asks the
// root for what is the root's (the cursor, the timeline highlight, the
// status line) with a paneAct. The Model routes to them by focus; the
// header, the hint line and the full-screen views are not panes.
type panel interface {
	// setSize is the body the layout gives the pane, under its title line.
	setSize(w, h int)
	// update takes a key while the pane has focus (select, page, enter,
	// sort); false: not one of its keys.
	update(c *paneCtx, msg tea.KeyMsg) (paneAct, bool)
	// view draws the body: at most h lines of w cells.
	view(c *paneCtx) []string
	// info is the right-aligned text of the pane's title line.
	info(c *paneCtx) string
	// keyMap is the keys the pane acts on while focused; the help screen
	// lists every one of them (TestPaneKeysInHelp).
	keyMap(k *keyMap) []key.Binding
}

// sizePanels gives each pane the body of its rect in the current layout
// (a hidden pane gets none).
func (m *Model) sizePanels() {
	_, tl, seg, ev, op := m.layout()
	for p, r := range [numPanes]rect{paneTimeline: tl, paneSegments: seg, paneEvents: ev, paneOps: op} {
		m.panels()[p].setSize(r.w, max(0, r.h-1))
	}
}

// panels are the four panes, in pane order.
func (m *Model) panels() [numPanes]panel { return m.p.list() }

// list is the panes in pane order.
func (p *mainPanes) list() [numPanes]panel {
	return [numPanes]panel{p.tl, p.seg, p.ev, p.ops}
}

// size is the body a panel was given.
type size struct{ w, h int }

func (s *size) setSize(w, h int) { s.w, s.h = w, h }

// page is how many rows PgUp/PgDn move in a list h rows high.
func page(h int) int { return max(1, h-2) }

// timelinePanel is the byte series over time (tui/timeline; the window
// and its series are the root's, which sets them on tl). ↑/↓ step the cursor one event;
// the page keys move it as the events pane does.
type timelinePanel struct {
	size
	tl timeline.Model

	// the window the chart shows: the whole range, or [win0, win1) zoomed
	zoomed     bool
	win0, win1 int64 // win1 exclusive
	catChart   bool  // the chart stacks live bytes by memory category (C)
}

// span is the window's width in the time base.
func (p *timelinePanel) span() int64 { return p.win1 - p.win0 }

// settle makes the window the whole of [first, last] unless zoomed, and
// never empty.
func (p *timelinePanel) settle(first, last int64) {
	if !p.zoomed {
		p.win0, p.win1 = first, last+1
	}
	if p.win1 <= p.win0 {
		p.win1 = p.win0 + 1
	}
}

// zoom halves (in) or doubles the window's span, keeping cursor c where
// it was in the window (the middle, when zooming in from the whole
// range); a span of the whole range, or more, is not zoomed. The span
// stays at least a chart column's worth.
func (p *timelinePanel) zoom(in bool, first, last, c int64) {
	span := p.span()
	if !p.zoomed {
		span = last + 1 - first
	}
	if in {
		span /= 2
	} else {
		span *= 2
	}
	span = max(span, int64(p.tl.Columns()))
	if span >= last+1-first {
		p.zoomed = false
		return
	}
	frac := 0.5
	if p.zoomed && p.win1 > p.win0 {
		frac = float64(c-p.win0) / float64(p.win1-p.win0)
	}
	w0 := c - int64(frac*float64(span))
	p.zoomed = true
	p.place(w0, w0+span, first, last)
}

// place sets the window to [w0, w1), moved to lie within [first, last].
func (p *timelinePanel) place(w0, w1, first, last int64) {
	span := w1 - w0
	if w0 < first {
		w0, w1 = first, first+span
	}
	if w1 > last+1 {
		w0, w1 = last+1-span, last+1
	}
	p.win0, p.win1 = w0, w1
}

// keepInView recentres a zoomed window on cursor c when c left it; it
// reports whether the window moved.
func (p *timelinePanel) keepInView(c int64) bool {
	if !p.zoomed || c >= p.win0 && c < p.win1 {
		return false
	}
	span := p.span()
	p.win0 = c - span/2
	p.win1 = p.win0 + span
	return true
}

func (p *timelinePanel) update(c *paneCtx, msg tea.KeyMsg) (paneAct, bool) {
	if k := c.keys; key.Matches(msg, k.Up, k.Down) {
		return paneAct{kind: actStep, n: dir(msg, k.Up)}, true
	}
	return cursorKey(c, msg)
}

func (p *timelinePanel) view(*paneCtx) []string { return strings.Split(p.tl.View(), "\n") }
func (p *timelinePanel) info(c *paneCtx) string { return timelineInfo(c) }
func (p *timelinePanel) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList}
}

// timelineInfo is the timeline's legend, after the zoom's span.
func timelineInfo(c *paneCtx) string {
	g := c.th.G
	info := fmt.Sprintf("%c allocated %c active %c reserved  %c step %c OOM", g.AllocArea, g.Active, g.Reserved, g.Step, g.OOM)
	if c.zoom != 0 {
		info = "zoom " + c.spanText(c.zoom) + "  " + info
	}
	return info
}

// segmentsPanel is the segment map at the cursor (tui/segmap; the root
// sets its state on seg) and when the selected block was allocated (allocAt):
// ↑/↓ and the page keys select a block, enter opens it, s sorts.
type segmentsPanel struct {
	size
	seg     segmap.Model
	allocAt string // when the block at allocK was allocated
	allocK  uint64 // address the allocAt text is for
}

func (p *segmentsPanel) update(c *paneCtx, msg tea.KeyMsg) (paneAct, bool) {
	k := c.keys
	if d, ok := listStep(k, msg, page(p.h)/2); ok {
		p.seg.Move(d)
		return paneAct{cmd: p.allocAtCmd(c)}, true
	}
	switch {
	case key.Matches(msg, k.Enter):
		p.seg.Enter()
	case key.Matches(msg, k.Sort):
		p.seg.ToggleSort()
		return paneAct{}, true
	default:
		return paneAct{}, false
	}
	return paneAct{cmd: p.allocAtCmd(c)}, true
}

func (p *segmentsPanel) view(c *paneCtx) []string {
	detail := p.seg.Detail(c.src.Stack, p.allocAtText(), p.w)
	return strings.Split(p.seg.View(p.w, p.h, detail), "\n")
}
func (p *segmentsPanel) info(*paneCtx) string { return "sort: " + p.seg.SortName() + " (s)" }
func (p *segmentsPanel) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.Enter, k.Sort}
}

// dir is -1 for the up binding, else +1.
func dir(msg tea.KeyMsg, up key.Binding) int {
	if key.Matches(msg, up) {
		return -1
	}
	return 1
}

// listStep is how far a key moves the selection of a list pane (segments,
// ops): ±1 for ↑/↓, ±pageRows for the page keys, and far enough for home
// and end that the list's clamp stops at its first or last row. false: not
// one of those keys.
func listStep(k *keyMap, msg tea.KeyMsg, pageRows int) (int, bool) {
	switch {
	case key.Matches(msg, k.Up, k.Down):
		return dir(msg, k.Up), true
	case key.Matches(msg, k.Home):
		return -1 << 30, true
	case key.Matches(msg, k.EndList):
		return 1 << 30, true
	case key.Matches(msg, k.PageUp):
		return -pageRows, true
	case key.Matches(msg, k.PageDown):
		return pageRows, true
	}
	return 0, false
}

// cursorKey takes the keys besides ↑/↓ that the panes following the cursor
// (timeline, events) share: home, end and the page keys move the cursor
// (a page is the events pane's height), s says which panes sort, enter
// does nothing. false: not one of them.
func cursorKey(c *paneCtx, msg tea.KeyMsg) (paneAct, bool) {
	k := c.keys
	switch {
	case key.Matches(msg, k.Home):
		return paneAct{kind: actStart}, true
	case key.Matches(msg, k.EndList):
		return paneAct{kind: actEnd}, true
	case key.Matches(msg, k.PageUp, k.PageDown):
		return paneAct{kind: actPage, n: dir(msg, k.PageUp)}, true
	case key.Matches(msg, k.Sort):
		return paneAct{kind: actNote, note: "s sorts the segments (2) or ops (4) pane"}, true
	case key.Matches(msg, k.Enter):
		return paneAct{}, true
	}
	return paneAct{}, false
}
