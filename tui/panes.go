package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/npumon/npumon/monitor/store"
)

// panel is the one contract of the main screen's four panes (timeline,
// segments, events, ops). Each is sized by the layout, takes the keys that
// act inside the focused pane with the shared cursor context (the Model:
// cursor, device, Source, filter), draws its body, and names its own keys
// for help. The Model routes to them by focus; the header, the hint line
// and the full-screen views are not panes.
type panel interface {
	// setSize is the body the layout gives the pane, under its title line.
	setSize(w, h int)
	// update takes a key while the pane has focus (select, page, enter,
	// sort); false: not one of its keys.
	update(ctx *Model, msg tea.KeyMsg) (tea.Cmd, bool)
	// view draws the body: at most h lines of w cells.
	view(ctx *Model) []string
	// info is the right-aligned text of the pane's title line.
	info(ctx *Model) string
	// keyMap is the keys the pane acts on while focused; the help screen
	// lists every one of them (TestPaneKeysInHelp).
	keyMap(k *keyMap) []key.Binding
}

// sizePanels gives each pane the body of its rect in the current layout
// (a hidden pane gets none).
func (m *Model) sizePanels() {
	_, tl, seg, ev, op := m.layout()
	for p, r := range [numPanes]rect{paneTimeline: tl, paneSegments: seg, paneEvents: ev, paneOps: op} {
		m.panels[p].setSize(r.w, max(0, r.h-1))
	}
}

// size is the body a panel was given.
type size struct{ w, h int }

func (s *size) setSize(w, h int) { s.w, s.h = w, h }

// page is how many rows PgUp/PgDn move in a list h rows high.
func page(h int) int { return max(1, h-2) }

// newPanels are the four panes, in pane order.
func newPanels() [numPanes]panel {
	return [numPanes]panel{&timelinePanel{}, &segmentsPanel{}, &eventsPanel{}, &opsPanel{}}
}

// timelinePanel is the byte series over time (tui/timeline). ↑/↓ step the
// cursor one event; the page keys move it as the events pane does.
type timelinePanel struct{ size }

func (p *timelinePanel) update(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
	if k := m.keys; key.Matches(msg, k.Up, k.Down) {
		m.stepEvent(dir(msg, k.Up))
		return nil, true
	}
	return nil, cursorKey(m, msg)
}

func (p *timelinePanel) view(m *Model) []string { return strings.Split(m.tl.View(), "\n") }
func (p *timelinePanel) info(m *Model) string   { return m.timelineInfo() }
func (p *timelinePanel) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList}
}

// segmentsPanel is the segment map at the cursor (tui/segmap): ↑/↓ and
// the page keys select a block, enter opens it, s sorts.
type segmentsPanel struct{ size }

func (p *segmentsPanel) update(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
	k := m.keys
	if d, ok := listStep(&m.keys, msg, page(p.h)/2); ok {
		m.seg.Move(d)
		return m.allocAtCmd(), true
	}
	switch {
	case key.Matches(msg, k.Enter):
		m.seg.Enter()
	case key.Matches(msg, k.Sort):
		m.seg.ToggleSort()
		return nil, true
	default:
		return nil, false
	}
	return m.allocAtCmd(), true
}

func (p *segmentsPanel) view(m *Model) []string {
	detail := m.seg.Detail(m.o.Source.Stack, m.allocAtText(), p.w)
	return strings.Split(m.seg.View(p.w, p.h, detail), "\n")
}
func (p *segmentsPanel) info(m *Model) string { return "sort: " + m.seg.SortName() + " (s)" }
func (p *segmentsPanel) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.Enter, k.Sort}
}

// eventsPanel is the trace around the cursor: the list follows the
// cursor, so ↑/↓ move time (from match to match while a filter is on).
type eventsPanel struct{ size }

func (p *eventsPanel) update(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
	k := m.keys
	if !key.Matches(msg, k.Up, k.Down) {
		return nil, cursorKey(m, msg)
	}
	if m.flt != nil {
		m.jumpMatch(dir(msg, k.Up))
	} else {
		m.stepEvent(dir(msg, k.Up))
	}
	return nil, true
}

func (p *eventsPanel) view(m *Model) []string { return m.eventLines(p.w, p.h) }
func (p *eventsPanel) info(m *Model) string   { return m.filterInfo() }
func (p *eventsPanel) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.NextMatch, k.PrevMatch}
}

// opsPanel is the profiler's ops: ↑/↓ and the page keys select one,
// enter highlights it and moves the cursor to its start, s sorts.
type opsPanel struct{ size }

func (p *opsPanel) update(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
	k := m.keys
	if d, ok := listStep(&m.keys, msg, page(p.h)); ok {
		m.opSel = clampInt(m.opSel+d, 0, len(m.opView)-1)
		return nil, true
	}
	switch {
	case key.Matches(msg, k.Enter):
		if m.opSel < 0 || m.opSel >= len(m.opView) {
			return nil, true
		}
		sel := m.opSel
		op := m.ops[m.opView[sel]]
		m.hlOp = true
		m.tl.SetHighlight(op.StartUS, op.EndUS, true)
		if m.base == store.TimeEpochUS {
			m.setCursor(op.StartUS)
			m.opSel = sel // the op chosen, not another one starting at the same time
		}
		return nil, true
	case key.Matches(msg, k.Sort):
		m.opSort = (m.opSort + 1) % len(opSortNames)
		m.rebuildOpView()
		return nil, true
	}
	return nil, false
}

func (p *opsPanel) view(m *Model) []string { return m.opLines(p.w, p.h) }
func (p *opsPanel) info(m *Model) string   { return "sort: " + opSortNames[m.opSort] + " (s)" }
func (p *opsPanel) keyMap(k *keyMap) []key.Binding {
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
// (timeline, events) share: home, end and the page keys move the cursor,
// s says which panes sort, enter does nothing. false: not one of them.
func cursorKey(m *Model, msg tea.KeyMsg) bool {
	k := m.keys
	switch {
	case key.Matches(msg, k.Home, k.EndList, k.PageUp, k.PageDown):
		cursorPage(m, msg)
	case key.Matches(msg, k.Sort):
		m.statusErr = "s sorts the segments (2) or ops (4) pane"
	case key.Matches(msg, k.Enter):
	default:
		return false
	}
	return true
}

// cursorPage moves the cursor a page of entries (the events pane's
// height), or to the start or the end.
func cursorPage(m *Model, msg tea.KeyMsg) {
	k := m.keys
	switch {
	case key.Matches(msg, k.Home):
		m.setCursor(m.first - 1)
	case key.Matches(msg, k.EndList):
		m.setCursor(m.last)
	default:
		_, _, _, ev, _ := m.layout()
		for range max(1, ev.h-3) {
			m.stepEvent(dir(msg, k.PageUp))
		}
	}
}
