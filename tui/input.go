package tui

import (
	"slices"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

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
	m.p.tl.zoomed = false
	m.d.streams.reset(m.o.Source.Streams(m.d.dev))
	c, ok := m.d.devCursor[m.d.dev]
	switch {
	case m.growing() && m.cur.follow || !ok && !m.o.Live:
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
			if m.growing() && m.cur.pos < m.d.n {
				m.cur.follow = false
			}
			m.refreshCursor()
			return
		}
		n = evs[len(evs)-1].Seq + 1 // past the farthest examined
	}
}

// zoom halves (in) or doubles the timeline's window around the cursor.
func (m *Model) zoom(in bool) {
	m.p.tl.zoom(in, m.d.first, m.d.last, m.cur.cursor)
	m.refreshWindow()
}

func (m *Model) startInput(mode inputMode, val string) { m.pr.open(mode, val) }

// open shows the prompt for mode with val typed in.
func (p *prompt) open(mode inputMode, val string) {
	p.input = mode
	p.ti.SetValue(val)
	p.ti.CursorEnd()
	p.ti.Focus()
}

// update edits the text; esc closes the prompt, enter closes it and
// returns what was typed (entered: the mode it was typed for).
func (p *prompt) update(msg tea.KeyMsg) (entered inputMode, val string, cmd tea.Cmd) {
	switch msg.Type {
	case tea.KeyEsc:
		p.input = inputNone
		p.ti.Blur()
		return inputNone, "", nil
	case tea.KeyEnter:
		mode := p.input
		p.input = inputNone
		p.ti.Blur()
		return mode, p.ti.Value(), nil
	}
	p.ti, cmd = p.ti.Update(msg)
	return inputNone, "", cmd
}

// line is the hint line while the prompt is open ("" when it is not).
func (p *prompt) line(th *theme.Theme) string {
	switch p.input {
	case inputFilter:
		return th.Key.Render("/") + " " + p.ti.View() + th.Dim.Render("   regex · size>10MiB · stream=N · enter applies · esc cancels")
	case inputJump:
		return th.Key.Render("jump to") + " " + p.ti.View() + th.Dim.Render("   15:04:05.123 · +1.5s · #entry · raw value · enter/esc")
	}
	return ""
}

// onInputKey hands a key to the open prompt and applies what it returns.
func (m *Model) onInputKey(msg tea.KeyMsg) tea.Cmd {
	if msg.Type == tea.KeyCtrlC {
		m.Close()
		return tea.Quit
	}
	mode, val, cmd := m.pr.update(msg)
	if mode == inputNone || !m.d.hasData {
		return cmd
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

func (m *Model) setFilter(f *filter) {
	m.pr.flt = f
	m.p.ops.updateView(f, 0)
	m.loadEvents()
}
