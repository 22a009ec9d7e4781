package tui

import (
	"slices"
	"sort"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// A key press goes down keyRoute until one layer takes it: the prompt
// while it is open, then the screen-wide bindings and the full-screen
// views in the order that decides who shadows whom (q quits everywhere;
// the help screen takes every other key; ? opens help over any other
// screen; …), then the focused pane (panes.go), then the main screen's
// bindings (mainKeys). The bindings are keyMap's, the ones the help
// screen and docs/tui.md list (keys.go, keydoc.go; TestRouteBindingsInHelp
// keeps every binding here in the help).

// keyLayer is one step of the route: a binding (key set: the layer takes
// the key when it matches), a screen's view (screens set: the layer is
// offered every key while one of them shows), or neither (offered every
// key that gets that far); take says whether it took the key.
type keyLayer struct {
	key     func(*keyMap) key.Binding
	screens []screen
	take    func(m *Model, msg tea.KeyMsg) (tea.Cmd, bool)
}

// binding is one of the main screen's keys and what it does.
type binding struct {
	key func(*keyMap) key.Binding
	do  func(m *Model) tea.Cmd
}

// takes is a layer that takes every key it is offered.
func takes(f func(m *Model, msg tea.KeyMsg) tea.Cmd) func(*Model, tea.KeyMsg) (tea.Cmd, bool) {
	return func(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) { return f(m, msg), true }
}

// keyRoute is who is offered a key, in order.
var keyRoute = []keyLayer{
	{key: func(k *keyMap) key.Binding { return k.Quit }, take: takes(func(m *Model, _ tea.KeyMsg) tea.Cmd {
		m.Close()
		return tea.Quit
	})},
	{screens: []screen{screenHelp}, take: takes(func(m *Model, msg tea.KeyMsg) tea.Cmd {
		m.vw.help.update(m.paneCtx(), msg)
		return nil
	})},
	{key: func(k *keyMap) key.Binding { return k.Help }, take: takes(func(m *Model, _ tea.KeyMsg) tea.Cmd {
		m.vw.help.open()
		return nil
	})},
	{screens: []screen{screenDevices}, take: takes(func(m *Model, msg tea.KeyMsg) tea.Cmd {
		m.vw.dev.update(m.paneCtx(), msg)
		return nil
	})},
	{key: func(k *keyMap) key.Binding { return k.Devices }, take: takes(func(m *Model, _ tea.KeyMsg) tea.Cmd {
		m.toggleDevices()
		return nil
	})},
	{screens: []screen{screenPicker}, take: takes((*Model).onPickerKey)},
	{screens: []screen{screenWhatIf}, take: takes((*Model).onWhatIfKey)},
	{screens: []screen{screenView}, take: func(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
		act, ok := m.vw.x.onViewKey(m.paneCtx(), msg)
		if !ok {
			return nil, false
		}
		return m.apply(act), true
	}},
	{key: func(k *keyMap) key.Binding { return k.Captures }, take: takes(func(m *Model, _ tea.KeyMsg) tea.Cmd {
		if m.o.Captures == nil {
			m.sl.err = "c lists the captures of a watched directory (npumon watch DIR)"
			return nil
		}
		m.vw.pick.shown, m.vw.pick.selPath = true, ""
		m.refreshPicker()
		return nil
	})},
	{screens: []screen{screenLoading, screenWaiting}, take: takes(func(m *Model, msg tea.KeyMsg) tea.Cmd {
		if key.Matches(msg, m.keys.Back) {
			return m.o.Back
		}
		return nil
	})},
	// What is left is the main screen, or a view that did not take the
	// key. The focused pane's own keys (select, page, enter, sort); what
	// it asks of the root, the root does. No pane takes a key mainKeys
	// binds (TestPanesShadowNoScreenKey).
	{take: func(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
		m.sizePanels()
		act, ok := m.panels()[m.p.focus].update(m.paneCtx(), msg)
		if !ok {
			return nil, false
		}
		return m.apply(act), true
	}},
	{take: func(m *Model, msg tea.KeyMsg) (tea.Cmd, bool) {
		for _, b := range mainKeys {
			if key.Matches(msg, b.key(&m.keys)) {
				return b.do(m), true
			}
		}
		return nil, false
	}},
}

// route hands a key press down keyRoute.
func (m *Model) route(msg tea.KeyMsg) tea.Cmd {
	m.dirty = true
	m.sl.err = ""
	if m.pr.input != inputNone {
		return m.onInputKey(msg)
	}
	sc := m.screen()
	for _, l := range keyRoute {
		if l.key != nil && !key.Matches(msg, l.key(&m.keys)) || l.screens != nil && !slices.Contains(l.screens, sc) {
			continue
		}
		if cmd, ok := l.take(m, msg); ok {
			return cmd
		}
	}
	return nil
}

// mainKeys are the main screen's bindings, after the focused pane's.
var mainKeys = []binding{
	{func(k *keyMap) key.Binding { return k.WhatIf }, (*Model).openWhatIf},
	{func(k *keyMap) key.Binding { return k.Back }, (*Model).back},
	{func(k *keyMap) key.Binding { return k.Play }, do((*Model).playPause)},
	{func(k *keyMap) key.Binding { return k.Follow }, (*Model).followKey},
	{func(k *keyMap) key.Binding { return k.Prev }, do(func(m *Model) { m.stepEvent(-1) })},
	{func(k *keyMap) key.Binding { return k.Next }, do(func(m *Model) { m.stepEvent(1) })},
	{func(k *keyMap) key.Binding { return k.BigPrev }, do(func(m *Model) { m.bigStep(-1) })},
	{func(k *keyMap) key.Binding { return k.BigNext }, do(func(m *Model) { m.bigStep(1) })},
	{func(k *keyMap) key.Binding { return k.Slower }, do(func(m *Model) { m.stepSpeed(-1) })},
	{func(k *keyMap) key.Binding { return k.Faster }, do(func(m *Model) { m.stepSpeed(1) })},
	{func(k *keyMap) key.Binding { return k.Start }, do(func(m *Model) { m.setCursor(m.d.first - 1) })},
	{func(k *keyMap) key.Binding { return k.End }, do((*Model).toEnd)},
	{func(k *keyMap) key.Binding { return k.NextMatch }, do(func(m *Model) { m.matchKey(1) })},
	{func(k *keyMap) key.Binding { return k.PrevMatch }, do(func(m *Model) { m.matchKey(-1) })},
	{func(k *keyMap) key.Binding { return k.NextOOM }, do((*Model).openOOM)},
	{func(k *keyMap) key.Binding { return k.Holders }, do((*Model).openHolders)},
	{func(k *keyMap) key.Binding { return k.Stack }, do((*Model).openStack)},
	{func(k *keyMap) key.Binding { return k.Mark }, do((*Model).setMark)},
	{func(k *keyMap) key.Binding { return k.CatChart }, do((*Model).toggleCategoryChart)},
	{func(k *keyMap) key.Binding { return k.Peak }, do(func(m *Model) {
		c, _ := m.o.Source.Peak(m.d.dev)
		m.setCursor(c)
	})},
	{func(k *keyMap) key.Binding { return k.Jump }, do(func(m *Model) { m.startInput(inputJump, "") })},
	{func(k *keyMap) key.Binding { return k.Filter }, do(func(m *Model) {
		txt := ""
		if m.pr.flt != nil {
			txt = m.pr.flt.text
		}
		m.startInput(inputFilter, txt)
	})},
	{func(k *keyMap) key.Binding { return k.ZoomIn }, do(func(m *Model) { m.zoom(true) })},
	{func(k *keyMap) key.Binding { return k.ZoomOut }, do(func(m *Model) { m.zoom(false) })},
	{func(k *keyMap) key.Binding { return k.PanLeft }, do(func(m *Model) { m.pan(-1) })},
	{func(k *keyMap) key.Binding { return k.PanRight }, do(func(m *Model) { m.pan(1) })},
	{func(k *keyMap) key.Binding { return k.ZoomReset }, do((*Model).unzoom)},
	{func(k *keyMap) key.Binding { return k.Tab }, do(func(m *Model) { m.focusPane((m.p.focus + 1) % numPanes) })},
	{func(k *keyMap) key.Binding { return k.BackTab }, do(func(m *Model) { m.focusPane((m.p.focus + numPanes - 1) % numPanes) })},
	{func(k *keyMap) key.Binding { return k.Pane1 }, do(func(m *Model) { m.focusPane(paneTimeline) })},
	{func(k *keyMap) key.Binding { return k.Pane2 }, do(func(m *Model) { m.focusPane(paneSegments) })},
	{func(k *keyMap) key.Binding { return k.Pane3 }, do(func(m *Model) { m.focusPane(paneEvents) })},
	{func(k *keyMap) key.Binding { return k.Pane4 }, do(func(m *Model) { m.focusPane(paneOps) })},
	{func(k *keyMap) key.Binding { return k.Device }, do(func(m *Model) {
		if len(m.d.devices) > 1 {
			m.switchDevice()
		} else {
			m.sl.err = "only one device in this source"
		}
	})},
	{func(k *keyMap) key.Binding { return k.Relative }, do(func(m *Model) {
		m.cur.relative = !m.cur.relative
		m.refreshWindow()
	})},
}

// do is a binding's action that starts nothing.
func do(f func(m *Model)) func(*Model) tea.Cmd {
	return func(m *Model) tea.Cmd { f(m); return nil }
}

// back (esc) undoes the latest of: a segment opened, an op highlighted,
// the filter, the zoom; with none, it leaves (Options.Back).
func (m *Model) back() tea.Cmd {
	switch {
	case m.p.focus == paneSegments && m.p.seg.seg.Back():
	case m.p.ops.unhighlight():
		m.p.tl.tl.SetHighlight(0, 0, false)
	case m.pr.flt != nil:
		m.setFilter(nil)
	case m.p.tl.zoomed:
		m.unzoom()
	default:
		return m.o.Back
	}
	return nil
}

// playPause (space) starts or stops following a live source, or playing
// a replay (from its start when at its end).
func (m *Model) playPause() {
	if m.o.Live {
		if m.cur.follow {
			m.cur.follow = false
		} else {
			m.cur.follow = true
			m.setCursor(m.d.last)
		}
		return
	}
	m.cur.playing = !m.cur.playing
	m.cur.lastTick = m.o.Now()
	if m.cur.playing {
		m.cur.follow = false // a file still loading: playing is not staying at its end
	}
	if m.cur.playing && m.cur.cursor >= m.d.last {
		m.setCursor(m.d.first - 1)
	}
}

// toEnd (G, end) goes to the end; while a file loads, the cursor then
// stays at the end of what is loaded as more lands (less's F), until it
// is moved elsewhere.
func (m *Model) toEnd() {
	m.setCursor(m.d.last)
	if m.ld.loading && !m.o.Live {
		m.cur.follow, m.cur.playing = true, false
	}
}

// followKey (f) follows a live source's newest entry (and capture).
func (m *Model) followKey() tea.Cmd {
	if !m.o.Live {
		m.sl.err = "f follows a live source; this one is a file (G goes to its end)"
		return nil
	}
	m.cur.follow = true
	m.setCursor(m.d.last)
	if m.o.Captures != nil {
		return m.followNewest()
	}
	return nil
}

// bigStep moves the cursor 1/20 of the timeline's window back (d < 0) or
// forward.
func (m *Model) bigStep(d int64) {
	m.setCursor(m.cur.cursor + d*max(1, m.p.tl.span()/20))
}

// stepSpeed makes playback one step of speeds slower (d < 0) or faster.
func (m *Model) stepSpeed(d int) {
	i := sort.SearchFloat64s(speeds, m.cur.speed)
	if d < 0 {
		i--
	} else if i < len(speeds) && speeds[i] == m.cur.speed {
		i++
	}
	m.cur.speed = speeds[clampInt(i, 0, len(speeds)-1)]
}

// matchKey (n, N) jumps to the next or previous filter match.
func (m *Model) matchKey(d int) {
	if m.pr.flt == nil {
		m.sl.err = "n and N jump between filter matches: set a filter with / first"
		return
	}
	m.jumpMatch(d)
}

// pan moves a zoomed window a quarter of its span left (d < 0) or right.
func (m *Model) pan(d int64) {
	if m.p.tl.zoomed {
		s := d * (m.p.tl.span() / 4)
		m.p.tl.place(m.p.tl.win0+s, m.p.tl.win1+s, m.d.first, m.d.last)
		m.refreshWindow()
	}
}

// unzoom shows the whole range on the timeline.
func (m *Model) unzoom() {
	m.p.tl.zoomed = false
	m.refreshWindow()
}

// focusPane gives p the focus.
func (m *Model) focusPane(p pane) {
	m.p.focus = p
	m.layoutPanes()
}
