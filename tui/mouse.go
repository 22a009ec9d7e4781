package tui

import (
	tea "github.com/charmbracelet/bubbletea"
	"github.com/npumon/npumon/monitor/store"
)

// onMouse handles the mouse; the keyboard stays complete without it. A
// click focuses the pane under it and, on the timeline, moves the cursor to
// that time; in a list it selects the row. The wheel zooms the timeline and
// scrolls the other panes.
func (m *Model) onMouse(msg tea.MouseMsg) tea.Cmd {
	if m.screen() != screenPanes || m.pr.input != inputNone {
		return nil
	}
	_, tl, seg, ev, op := m.layout()
	in := func(r rect) bool {
		return r.ok() && msg.X >= r.x && msg.X < r.x+r.w && msg.Y >= r.y && msg.Y < r.y+r.h
	}
	var p pane
	switch {
	case in(tl):
		p = paneTimeline
	case in(seg):
		p = paneSegments
	case in(ev):
		p = paneEvents
	case in(op):
		p = paneOps
	default:
		return nil
	}
	wheel := 0
	switch msg.Button {
	case tea.MouseButtonWheelUp:
		wheel = -1
	case tea.MouseButtonWheelDown:
		wheel = 1
	}
	m.dirty = true
	if wheel != 0 {
		switch p {
		case paneTimeline:
			m.zoom(wheel < 0)
		case paneSegments:
			m.p.seg.seg.Move(3 * wheel)
			return m.p.seg.allocAtCmd(m.paneCtx())
		case paneOps:
			m.p.ops.move(3 * wheel)
		case paneEvents:
			m.stepEvent(wheel)
		}
		return nil
	}
	if msg.Button != tea.MouseButtonLeft || msg.Action != tea.MouseActionPress {
		return nil
	}
	if m.p.focus != p {
		m.p.focus = p
		m.layoutPanes()
		_, tl, seg, ev, op = m.layout()
	}
	switch p {
	case paneTimeline:
		if t, ok := m.p.tl.tl.TimeAt(msg.X - tl.x); ok && msg.Y > tl.y {
			m.setCursor(t)
		}
	case paneSegments:
		// title and legend lines, then the list
		if m.p.seg.seg.SelectRow(msg.Y - seg.y - 2) {
			return m.p.seg.allocAtCmd(m.paneCtx())
		}
	case paneOps:
		// title and column header, then the rows as last drawn
		if i, ok := m.p.ops.rowAt(msg.Y - op.y - 2); ok {
			m.p.ops.selectRow(i)
		}
	case paneEvents:
		// title and column header, then the rows the pane draws
		if e, ok := m.p.ev.rowAt(msg.Y-ev.y-2, ev.h-2); ok {
			m.goToEvent(e)
		}
	}
	return nil
}

// goToEvent moves the cursor to just after entry e.
func (m *Model) goToEvent(e store.Event) {
	m.cur.pos = e.Seq + 1
	if m.growing() && m.cur.pos < m.d.n {
		m.cur.follow = false
	}
	m.refreshCursor()
}
