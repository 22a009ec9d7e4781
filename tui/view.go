package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

type rect struct{ x, y, w, h int }

func (r rect) ok() bool { return r.w > 0 && r.h > 0 }

const (
	headerRows = 2
	hintRows   = 1
)

// compact reports whether the screen is too small for all four panes.
func (m *Model) compact() bool { return m.w < 100 || m.h < 30 }

// layout places the panes; a zero rect is a hidden pane. Compact screens
// show the timeline strip plus the focused pane, which grows.
func (m *Model) layout() (compact bool, tl, seg, ev, op rect) {
	w, h := m.w, m.h
	avail := h - headerRows - hintRows
	if w <= 0 || avail <= 0 {
		return true, rect{}, rect{}, rect{}, rect{}
	}
	y := headerRows
	if m.compact() {
		th := min(8, avail/3)
		if m.p.focus == paneTimeline {
			th = max(th, avail/2)
		}
		if th < 4 {
			th = 0
		}
		tl = rect{0, y, w, th}
		rest := rect{0, y + th, w, avail - th}
		switch m.p.focus {
		case paneTimeline, paneEvents:
			ev = rest
		case paneSegments:
			seg = rest
		case paneOps:
			op = rest
		}
		return true, tl, seg, ev, op
	}
	tlH := max(8, avail*30/100)
	opH := max(5, avail*24/100)
	if m.p.ops.count() == 0 {
		opH = 3 // title, header and "no profiler ops"
	}
	midH := avail - tlH - opH
	// The event rows need about 68 columns; the segment map takes the rest.
	segW := clampInt(w-68, w*40/100, w*55/100)
	tl = rect{0, y, w, tlH}
	seg = rect{0, y + tlH, segW, midH}
	ev = rect{segW + 1, y + tlH, w - segW - 1, midH}
	op = rect{0, y + tlH + midH, w, opH}
	return false, tl, seg, ev, op
}

// layoutPanes sizes the panes after a resize or a focus change.
func (m *Model) layoutPanes() {
	m.vw.wi.v.SetSize(m.w, max(0, m.h-headerRows-hintRows))
	_, tl, _, _, _ := m.layout()
	oldCols := m.p.tl.tl.Columns()
	m.p.tl.tl.SetSize(tl.w, max(0, tl.h-1))
	if m.d.hasData {
		if m.p.tl.tl.Columns() != oldCols {
			m.refreshWindow()
		}
		m.loadEvents()
	}
}

// View renders the whole screen, exactly w×h; it is cached until something changes.
func (m *Model) View() string {
	if !m.dirty && m.frame != "" {
		return m.frame
	}
	m.frame = m.render()
	m.dirty = false
	return m.frame
}

func (m *Model) render() string {
	if m.w <= 0 || m.h <= 0 {
		return ""
	}
	body := m.h - headerRows - hintRows
	if body < 3 || m.w < 20 {
		lines := make([]string, m.h)
		lines[0] = fit("npumon: terminal too small", m.w)
		for i := 1; i < m.h; i++ {
			lines[i] = fit("", m.w)
		}
		return strings.Join(lines, "\n")
	}
	lines := make([]string, 0, m.h)
	noteBelow := false
	if m.o.DevicesOnly {
		lines = append(lines, m.vw.dev.header(m.paneCtx())...)
	} else {
		var head []string
		head, noteBelow = m.headerLines()
		lines = append(lines, head...)
	}
	switch m.screen() {
	case screenHelp:
		lines = append(lines, m.vw.help.lines(m.paneCtx(), body)...)
	case screenDevices:
		lines = append(lines, m.vw.dev.lines(m.paneCtx(), body)...)
	case screenPicker:
		lines = append(lines, m.pickerLines(body)...)
	case screenWhatIf:
		lines = append(lines, m.whatIfLines(body)...)
	case screenView:
		lines = append(lines, m.vw.x.viewLines(m.paneCtx(), body)...)
	case screenLoading:
		lines = append(lines, m.loadingLines(body)...)
	case screenWaiting:
		msg := "waiting for data…"
		if p := m.capturesProblem(); p != "" {
			msg = p // a watched directory whose captures cannot be shown says why
		}
		lines = append(lines, centered(body, m.w, msg)...)
	default:
		lines = append(lines, m.bodyLines(body)...)
	}
	lines = append(lines, m.hintLine(noteBelow))
	for len(lines) < m.h {
		lines = append(lines, "")
	}
	lines = lines[:m.h]
	for i := range lines {
		if m.th.ASCII {
			lines[i] = theme.ToASCII(lines[i])
		}
		lines[i] = fit(lines[i], m.w)
	}
	return strings.Join(lines, "\n")
}

func (m *Model) bodyLines(body int) []string {
	compact, tl, seg, ev, op := m.layout()
	grid := make([]string, body)
	put := func(r rect, content []string) {
		for i, l := range content {
			y := r.y - headerRows + i
			if y < 0 || y >= body || i >= r.h {
				break
			}
			if r.x == 0 {
				grid[y] = m.th.Fit(l, r.w)
			} else {
				grid[y] = fit(grid[y], r.x-1) + m.th.Dim.Render(m.th.G.VBar) + m.th.Fit(l, r.w)
			}
		}
	}
	m.sizePanels()
	c := m.paneCtx()
	for p, r := range [numPanes]rect{paneTimeline: tl, paneSegments: seg, paneEvents: ev, paneOps: op} {
		if r.ok() {
			pn := m.panels()[p]
			put(r, append([]string{m.title(pane(p), r.w, compact, pn.info(c))}, pn.view(c)...))
		}
	}
	return grid
}

func (m *Model) spanText(d int64) string { return spanText(m.d.base, d) }

// spanText is a duration, or a count of entries in a sequence time base.
func spanText(base store.TimeBase, d int64) string {
	if base == store.TimeSequence {
		return strconv.FormatInt(d, 10) + " entries"
	}
	return fmtDurUS(d)
}

// title is a pane's first line: number and name (tabs in compact mode) and
// right-aligned info.
func (m *Model) title(p pane, w int, compact bool, info string) string {
	th := m.th
	name := func(p pane) string {
		t := fmt.Sprintf("%d %s", p+1, paneNames[p])
		if p == m.p.focus {
			return th.TitleFocused.Render("[" + t + "]")
		}
		return th.Title.Render(" " + t + " ")
	}
	left := name(p)
	if compact && p == m.p.focus { // the focused pane's title names every pane, as tabs
		left = ""
		for i := pane(0); i < numPanes; i++ {
			left += name(i)
		}
	}
	lw := theme.Width(left)
	iw := theme.Width(info)
	fill := w - lw - iw - 2
	if fill < 1 {
		return fit(left, w)
	}
	return left + th.Dim.Render(strings.Repeat(th.G.HBar, fill)) + " " + th.Dim.Render(info) + " "
}

func (m *Model) loadingLines(body int) []string {
	th := m.th
	if m.ld.loadErr != nil {
		return centered(body, m.w, th.Warn.Render("error: "+m.ld.loadErr.Error()), "", "q quits")
	}
	stage := m.ld.progress().Stage
	if stage == "" {
		stage = "loading"
	}
	// The line above names the stage: the progress line goes without.
	return centered(body, m.w, stage+" "+m.o.SourceName, "", m.progressLine(min(m.w-2, 78), false), "", th.Dim.Render("q quits"))
}

func centered(h, w int, text ...string) []string {
	out := make([]string, h)
	top := max(0, (h-len(text))/2)
	for i, t := range text {
		if top+i < h {
			pad := max(0, (w-theme.Width(t))/2)
			out[top+i] = strings.Repeat(" ", pad) + t
		}
	}
	return out
}

// fit pads or truncates a styled line to exactly w cells.
func fit(s string, w int) string { return theme.Fit(s, w) }
