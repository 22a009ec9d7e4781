package tui

import (
	"slices"
	"sort"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/monitor"
)

// onKey handles a key press.
func (m *Model) onKey(msg tea.KeyMsg) tea.Cmd {
	m.dirty = true
	m.statusErr = ""
	if m.input != inputNone {
		return m.onInputKey(msg)
	}
	k := m.keys
	if key.Matches(msg, k.Quit) {
		m.Close()
		return tea.Quit
	}
	if m.showHelp {
		if key.Matches(msg, k.Back, k.Help) {
			m.showHelp = false
		}
		return nil
	}
	if key.Matches(msg, k.Help) {
		m.showHelp = true
		return nil
	}
	if m.pick.shown {
		return m.onPickerKey(msg)
	}
	if m.wiOpen {
		return m.onWhatIfKey(msg)
	}
	if m.o.Captures != nil && key.Matches(msg, k.Captures) {
		m.pick.shown, m.pick.selPath = true, ""
		m.refreshPicker()
		return nil
	}
	if m.loading || !m.hasData {
		return nil
	}
	src := m.o.Source
	switch {
	case key.Matches(msg, k.WhatIf):
		return m.openWhatIf()
	case key.Matches(msg, k.Back):
		switch {
		case m.focus == paneSegments && m.seg.Back():
		case m.hlOp:
			m.hlOp = false
			m.tl.SetHighlight(0, 0, false)
		case m.flt != nil:
			m.setFilter(nil)
		case m.zoomed:
			m.zoomed = false
			m.refreshWindow()
		}
	case key.Matches(msg, k.Play):
		if m.o.Live {
			if m.follow {
				m.follow = false
			} else {
				m.follow = true
				m.setCursor(m.last)
			}
		} else {
			m.playing = !m.playing
			m.lastTick = m.o.Now()
			if m.playing && m.cursor >= m.last {
				m.setCursor(m.first - 1)
			}
		}
	case key.Matches(msg, k.Follow):
		if m.o.Live {
			m.follow = true
			m.setCursor(m.last)
		}
	case key.Matches(msg, k.Prev):
		m.stepEvent(-1)
	case key.Matches(msg, k.Next):
		m.stepEvent(1)
	case key.Matches(msg, k.BigPrev), key.Matches(msg, k.BigNext):
		step := max(1, (m.win1-m.win0)/20)
		if key.Matches(msg, k.BigPrev) {
			step = -step
		}
		m.setCursor(m.cursor + step)
	case key.Matches(msg, k.Slower), key.Matches(msg, k.Faster):
		i := sort.SearchFloat64s(speeds, m.speed)
		if key.Matches(msg, k.Slower) {
			i--
		} else if i < len(speeds) && speeds[i] == m.speed {
			i++
		}
		m.speed = speeds[clampInt(i, 0, len(speeds)-1)]
	case key.Matches(msg, k.Start):
		m.setCursor(m.first - 1)
	case key.Matches(msg, k.End):
		m.setCursor(m.last)
	case key.Matches(msg, k.NextOOM):
		if c, ok := src.Next(m.dev, m.cursor, allocator.ActionOOM); ok {
			m.setCursor(c)
		} else {
			m.statusErr = "no OOM after the cursor"
		}
	case key.Matches(msg, k.Peak):
		c, _ := src.Peak(m.dev)
		m.setCursor(c)
	case key.Matches(msg, k.Jump):
		m.startInput(inputJump, "")
	case key.Matches(msg, k.Filter):
		txt := ""
		if m.flt != nil {
			txt = m.flt.text
		}
		m.startInput(inputFilter, txt)
	case key.Matches(msg, k.ZoomIn), key.Matches(msg, k.ZoomOut):
		m.zoom(key.Matches(msg, k.ZoomIn))
	case key.Matches(msg, k.PanLeft), key.Matches(msg, k.PanRight):
		if m.zoomed {
			d := (m.win1 - m.win0) / 4
			if key.Matches(msg, k.PanLeft) {
				d = -d
			}
			m.setWindow(m.win0+d, m.win1+d)
		}
	case key.Matches(msg, k.ZoomReset):
		m.zoomed = false
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
		if len(m.devices) > 1 {
			i := max(0, slices.Index(m.devices, m.dev))
			m.dev = m.devices[(i+1)%len(m.devices)]
			m.readBounds()
			m.zoomed = false
			m.cursor, m.pos = m.clampCursor(m.cursor), -1
			m.refreshWindow()
			m.refreshCursor()
		} else {
			m.statusErr = "only one device in this source"
		}
	case key.Matches(msg, k.Relative):
		m.relative = !m.relative
		m.refreshWindow()
	case key.Matches(msg, k.Up), key.Matches(msg, k.Down):
		d := 1
		if key.Matches(msg, k.Up) {
			d = -1
		}
		return m.moveSelection(d)
	case key.Matches(msg, k.Enter):
		return m.enter()
	case key.Matches(msg, k.Sort):
		switch m.focus {
		case paneOps:
			m.opSort = (m.opSort + 1) % len(opSortNames)
			m.rebuildOpView()
		case paneSegments:
			m.seg.ToggleSort()
		}
	}
	return nil
}

// moveSelection moves inside the focused pane.
func (m *Model) moveSelection(d int) tea.Cmd {
	switch m.focus {
	case paneSegments:
		m.seg.Move(d)
		return m.allocAtCmd()
	case paneOps:
		m.opSel = clampInt(m.opSel+d, 0, len(m.opView)-1)
	case paneEvents, paneTimeline:
		// the event list follows the cursor: moving the selection moves time
		m.stepEvent(d)
	}
	return nil
}

func (m *Model) enter() tea.Cmd {
	switch m.focus {
	case paneSegments:
		m.seg.Enter()
		return m.allocAtCmd()
	case paneOps:
		if m.opSel < 0 || m.opSel >= len(m.opView) {
			return nil
		}
		sel := m.opSel
		op := m.ops[m.opView[sel]]
		m.hlOp = true
		m.tl.SetHighlight(op.StartUS, op.EndUS, true)
		if m.base == monitor.TimeEpochUS {
			m.setCursor(op.StartUS)
			m.opSel = sel // the op chosen, not another one starting at the same time
		}
	}
	return nil
}

func (m *Model) zoom(in bool) {
	span := m.win1 - m.win0
	if !m.zoomed {
		span = m.last + 1 - m.first
	}
	if in {
		span /= 2
	} else {
		span *= 2
	}
	minSpan := int64(m.tl.Columns())
	if span < minSpan {
		span = minSpan
	}
	if span >= m.last+1-m.first {
		m.zoomed = false
		m.refreshWindow()
		return
	}
	c := m.cursor
	frac := 0.5
	if m.zoomed && m.win1 > m.win0 {
		frac = float64(c-m.win0) / float64(m.win1-m.win0)
	}
	w0 := c - int64(frac*float64(span))
	m.zoomed = true
	m.setWindow(w0, w0+span)
}

func (m *Model) setWindow(w0, w1 int64) {
	span := w1 - w0
	if w0 < m.first {
		w0, w1 = m.first, m.first+span
	}
	if w1 > m.last+1 {
		w0, w1 = m.last+1-span, m.last+1
	}
	m.win0, m.win1 = w0, w1
	m.refreshWindow()
}

func (m *Model) startInput(mode inputMode, val string) {
	m.input = mode
	m.ti.SetValue(val)
	m.ti.CursorEnd()
	m.ti.Focus()
}

func (m *Model) onInputKey(msg tea.KeyMsg) tea.Cmd {
	switch msg.Type {
	case tea.KeyEsc:
		m.input = inputNone
		m.ti.Blur()
		return nil
	case tea.KeyCtrlC:
		m.Close()
		return tea.Quit
	case tea.KeyEnter:
		mode := m.input
		m.input = inputNone
		m.ti.Blur()
		val := m.ti.Value()
		if !m.hasData {
			return nil
		}
		switch mode {
		case inputFilter:
			f, err := parseFilter(val)
			if err != nil {
				m.statusErr = err.Error()
				return nil
			}
			m.setFilter(f)
		case inputJump:
			c, err := m.parseJump(val)
			if err != nil {
				m.statusErr = err.Error()
				return nil
			}
			m.setCursor(c)
		}
		return nil
	}
	var cmd tea.Cmd
	m.ti, cmd = m.ti.Update(msg)
	return cmd
}

func (m *Model) setFilter(f *filter) {
	m.flt = f
	m.rebuildOpView()
	m.loadEvents()
}
