package tui

import (
	"slices"
	"sort"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/npumon/npumon/monitor/store"
)

// onKey handles a key press.
func (m *Model) onKey(msg tea.KeyMsg) tea.Cmd {
	m.dirty = true
	m.sl.err = ""
	if m.pr.input != inputNone {
		return m.onInputKey(msg)
	}
	k := m.keys
	if key.Matches(msg, k.Quit) {
		m.Close()
		return tea.Quit
	}
	sc := m.screen()
	if sc == screenHelp {
		m.hv.update(m.paneCtx(), msg)
		return nil
	}
	if key.Matches(msg, k.Help) {
		m.hv.open()
		return nil
	}
	if sc == screenDevices {
		m.dv.update(m.paneCtx(), msg)
		return nil
	}
	if key.Matches(msg, k.Devices) {
		m.toggleDevices()
		return nil
	}
	switch sc {
	case screenPicker:
		return m.onPickerKey(msg)
	case screenWhatIf:
		return m.onWhatIfKey(msg)
	case screenView:
		if act, handled := m.x.onViewKey(m.paneCtx(), msg); handled {
			return m.apply(act)
		}
	}
	if key.Matches(msg, k.Captures) {
		if m.o.Captures == nil {
			m.sl.err = "c lists the captures of a watched directory (npumon watch DIR)"
			return nil
		}
		m.pick.shown, m.pick.selPath = true, ""
		m.refreshPicker()
		return nil
	}
	if sc == screenLoading || sc == screenWaiting {
		if key.Matches(msg, k.Back) {
			return m.o.Back
		}
		return nil
	}
	// The focused pane's own keys first (panes.go: select, page, enter,
	// sort); what it asks of the root, the root does. No pane takes a key
	// the screen binds below.
	m.sizePanels()
	if act, ok := m.panels()[m.focus].update(m.paneCtx(), msg); ok {
		return m.apply(act)
	}
	src := m.o.Source
	switch {
	case key.Matches(msg, k.WhatIf):
		return m.openWhatIf()
	case key.Matches(msg, k.Back):
		switch {
		case m.focus == paneSegments && m.segPane.seg.Back():
		case m.opTab.unhighlight():
			m.tlPane.tl.SetHighlight(0, 0, false)
		case m.pr.flt != nil:
			m.setFilter(nil)
		case m.tlPane.zoomed:
			m.tlPane.zoomed = false
			m.refreshWindow()
		default:
			return m.o.Back
		}
	case key.Matches(msg, k.Play):
		if m.o.Live {
			if m.cur.follow {
				m.cur.follow = false
			} else {
				m.cur.follow = true
				m.setCursor(m.d.last)
			}
		} else {
			m.cur.playing = !m.cur.playing
			m.cur.lastTick = m.o.Now()
			if m.cur.playing && m.cur.cursor >= m.d.last {
				m.setCursor(m.d.first - 1)
			}
		}
	case key.Matches(msg, k.Follow):
		if !m.o.Live {
			m.sl.err = "f follows a live source; this one is a file (G goes to its end)"
			break
		}
		m.cur.follow = true
		m.setCursor(m.d.last)
		if m.o.Captures != nil {
			return m.followNewest()
		}
	case key.Matches(msg, k.Prev):
		m.stepEvent(-1)
	case key.Matches(msg, k.Next):
		m.stepEvent(1)
	case key.Matches(msg, k.BigPrev), key.Matches(msg, k.BigNext):
		step := max(1, (m.tlPane.win1-m.tlPane.win0)/20)
		if key.Matches(msg, k.BigPrev) {
			step = -step
		}
		m.setCursor(m.cur.cursor + step)
	case key.Matches(msg, k.Slower), key.Matches(msg, k.Faster):
		i := sort.SearchFloat64s(speeds, m.cur.speed)
		if key.Matches(msg, k.Slower) {
			i--
		} else if i < len(speeds) && speeds[i] == m.cur.speed {
			i++
		}
		m.cur.speed = speeds[clampInt(i, 0, len(speeds)-1)]
	case key.Matches(msg, k.Start):
		m.setCursor(m.d.first - 1)
	case key.Matches(msg, k.End):
		m.setCursor(m.d.last)
	case key.Matches(msg, k.NextMatch), key.Matches(msg, k.PrevMatch):
		if m.pr.flt == nil {
			m.sl.err = "n and N jump between filter matches: set a filter with / first"
			break
		}
		d := 1
		if key.Matches(msg, k.PrevMatch) {
			d = -1
		}
		m.jumpMatch(d)
	case key.Matches(msg, k.NextOOM):
		m.openOOM()
	case key.Matches(msg, k.Holders):
		m.openHolders()
	case key.Matches(msg, k.Stack):
		m.openStack()
	case key.Matches(msg, k.Mark):
		m.setMark()
	case key.Matches(msg, k.CatChart):
		m.toggleCategoryChart()
	case key.Matches(msg, k.Peak):
		c, _ := src.Peak(m.d.dev)
		m.setCursor(c)
	case key.Matches(msg, k.Jump):
		m.startInput(inputJump, "")
	case key.Matches(msg, k.Filter):
		txt := ""
		if m.pr.flt != nil {
			txt = m.pr.flt.text
		}
		m.startInput(inputFilter, txt)
	case key.Matches(msg, k.ZoomIn), key.Matches(msg, k.ZoomOut):
		m.zoom(key.Matches(msg, k.ZoomIn))
	case key.Matches(msg, k.PanLeft), key.Matches(msg, k.PanRight):
		if m.tlPane.zoomed {
			d := (m.tlPane.win1 - m.tlPane.win0) / 4
			if key.Matches(msg, k.PanLeft) {
				d = -d
			}
			m.setWindow(m.tlPane.win0+d, m.tlPane.win1+d)
		}
	case key.Matches(msg, k.ZoomReset):
		m.tlPane.zoomed = false
		m.refreshWindow()
	case key.Matches(msg, k.Tab):
		m.focus = (m.focus + 1) % numPanes
		m.layoutPanes()
	case key.Matches(msg, k.BackTab):
		m.focus = (m.focus + numPanes - 1) % numPanes
		m.layoutPanes()
	case key.Matches(msg, k.Pane1), key.Matches(msg, k.Pane2), key.Matches(msg, k.Pane3), key.Matches(msg, k.Pane4):
		m.focus = pane(msg.String()[0] - '1')
		m.layoutPanes()
	case key.Matches(msg, k.Device):
		if len(m.d.devices) > 1 {
			m.switchDevice()
		} else {
			m.sl.err = "only one device in this source"
		}
	case key.Matches(msg, k.Relative):
		m.cur.relative = !m.cur.relative
		m.refreshWindow()
	}
	return nil
}

// switchDevice shows the next device at the cursor it had when last shown
// (its end, for a replay, the first time; its newest entry when following).
func (m *Model) switchDevice() {
	if m.d.devCursor == nil {
		m.d.devCursor = map[int][2]int64{}
	}
	m.d.devCursor[m.d.dev] = [2]int64{m.cur.cursor, m.cur.pos}
	i := max(0, slices.Index(m.d.devices, m.d.dev))
	m.d.dev = m.d.devices[(i+1)%len(m.d.devices)]
	m.readBounds()
	m.tlPane.zoomed = false
	m.d.streams.reset(m.o.Source.Streams(m.d.dev))
	c, ok := m.d.devCursor[m.d.dev]
	switch {
	case m.o.Live && m.cur.follow || !ok && !m.o.Live:
		m.cur.cursor, m.cur.pos = m.d.last, -1
	case ok:
		m.cur.cursor, m.cur.pos = m.clampCursor(c[0]), c[1]
	default:
		m.cur.cursor, m.cur.pos = m.clampCursor(m.cur.cursor), -1
	}
	if m.cur.pos > m.d.n {
		m.cur.pos = -1
	}
	m.refreshWindow()
	m.refreshCursor()
}

// jumpMatch moves the cursor to the next (d > 0) or previous entry that
// matches the filter, searching the whole log from the cursor outwards.
func (m *Model) jumpMatch(d int) {
	src, c := m.o.Source, m.paneCtx()
	const chunk = 4096
	n := m.at.sum.Applied // entries applied; the one at the cursor is n−1
	for {
		var evs []store.Event
		if d > 0 {
			evs = src.EventsAroundSeq(m.d.dev, n, 0, chunk)
		} else {
			evs = src.EventsAroundSeq(m.d.dev, n-1, chunk, 0) // ends with entry n−2
		}
		if len(evs) == 0 {
			m.sl.err = "no more entries match the filter"
			return
		}
		if d < 0 {
			slices.Reverse(evs)
		}
		for i := range evs {
			e := &evs[i]
			if !c.matchEvent(e) {
				continue
			}
			m.cur.pos = e.Seq + 1
			if m.o.Live && m.cur.pos < m.d.n {
				m.cur.follow = false
			}
			m.refreshCursor()
			return
		}
		n = evs[len(evs)-1].Seq + 1 // past the farthest examined
	}
}

func (m *Model) zoom(in bool) {
	span := m.tlPane.win1 - m.tlPane.win0
	if !m.tlPane.zoomed {
		span = m.d.last + 1 - m.d.first
	}
	if in {
		span /= 2
	} else {
		span *= 2
	}
	minSpan := int64(m.tlPane.tl.Columns())
	if span < minSpan {
		span = minSpan
	}
	if span >= m.d.last+1-m.d.first {
		m.tlPane.zoomed = false
		m.refreshWindow()
		return
	}
	c := m.cur.cursor
	frac := 0.5
	if m.tlPane.zoomed && m.tlPane.win1 > m.tlPane.win0 {
		frac = float64(c-m.tlPane.win0) / float64(m.tlPane.win1-m.tlPane.win0)
	}
	w0 := c - int64(frac*float64(span))
	m.tlPane.zoomed = true
	m.setWindow(w0, w0+span)
}

func (m *Model) setWindow(w0, w1 int64) {
	span := w1 - w0
	if w0 < m.d.first {
		w0, w1 = m.d.first, m.d.first+span
	}
	if w1 > m.d.last+1 {
		w0, w1 = m.d.last+1-span, m.d.last+1
	}
	m.tlPane.win0, m.tlPane.win1 = w0, w1
	m.refreshWindow()
}

func (m *Model) startInput(mode inputMode, val string) {
	m.pr.input = mode
	m.pr.ti.SetValue(val)
	m.pr.ti.CursorEnd()
	m.pr.ti.Focus()
}

func (m *Model) onInputKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEsc:
		m.pr.input = inputNone
		m.pr.ti.Blur()
		return nil
	case tea.KeyCtrlC:
		m.Close()
		return tea.Quit
	case tea.KeyEnter:
		mode := m.pr.input
		m.pr.input = inputNone
		m.pr.ti.Blur()
		val := m.pr.ti.Value()
		if !m.d.hasData {
			return nil
		}
		switch mode {
		case inputFilter:
			f, err := parseFilter(val)
			if err != nil {
				m.sl.err = err.Error()
				return nil
			}
			m.setFilter(f)
		case inputJump:
			c, err := m.parseJump(val)
			if err != nil {
				m.sl.err = err.Error()
				return nil
			}
			m.setCursor(c)
		}
		return nil
	}
	var cmd tea.Cmd
	m.pr.ti, cmd = m.pr.ti.Update(msg)
	return cmd
}

func (m *Model) setFilter(f *filter) {
	m.pr.flt = f
	m.opTab.updateView(f, 0)
	m.loadEvents()
}
