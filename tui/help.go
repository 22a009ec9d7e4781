package tui

import (
	"path/filepath"
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/internal/cells"
	"github.com/npumon/npumon/tui/theme"
	tuiwhatif "github.com/npumon/npumon/tui/whatif"
)

// hintLine is the bottom line; noteBelow: the header had no room for the
// connection's note, which then goes here.
func (m *Model) hintLine(noteBelow bool) string {
	th := m.th
	if l := m.pr.line(th); l != "" {
		return l
	}
	if m.sl.err != "" {
		return th.Warn.Render(m.sl.err)
	}
	sc := m.screen()
	if sc == screenPanes { // a view's hint keeps its keys; the header says what failed
		// A file still loading: its progress, where less says it waits.
		switch {
		case m.ld.loading:
			return m.progressLine(m.w, true)
		case m.ld.loadErr != nil:
			return th.Warn.Render("load failed, showing what loaded before: " + m.ld.loadErr.Error())
		}
	}
	switch sc {
	case screenHelp:
		if c := m.paneCtx(); len(m.vw.help.text(c)) > m.vw.help.page(c) {
			return th.Hint.Render("↑/↓ pgup/pgdn scroll · ? or esc closes help · q quits")
		}
		return th.Hint.Render("? or esc closes help · q quits")
	case screenDevices:
		return th.Hint.Render(m.vw.dev.hint())
	case screenPicker:
		// a narrow row cuts a capture's error: the selected one's shows whole here
		if i := m.vw.pick.sel; i >= 0 && i < len(m.vw.pick.list) && m.vw.pick.list[i].Error != "" {
			e := ": " + why(&m.vw.pick.list[i])
			return th.Warn.Render(fit(cells.TruncMiddle(filepath.Base(m.vw.pick.list[i].Path), max(12, m.w-theme.Width(e)))+e, m.w))
		}
		return th.Hint.Render("↑/↓ select · enter opens · esc closes · q quits")
	case screenWhatIf:
		return th.Hint.Render(tuiwhatif.Hint + " · q quits")
	case screenView:
		return th.Hint.Render(m.vw.x.viewHint(m.paneCtx()))
	}
	if noteBelow { // a narrow header has no room for why
		return th.Warn.Render(m.connText()) + th.Hint.Render(" · ? help")
	}
	hl := m.vw.help.hl
	hl.Width = m.w
	short := m.keys.ShortHelp()
	if m.o.Captures != nil {
		short = append([]key.Binding{m.keys.Captures}, short...)
	}
	if m.d.hasData && (m.at.sum.OOMs > 0 || m.at.oomAhead) { // the source has an OOM: say first how to see why
		short = append([]key.Binding{m.keys.NextOOM}, short...)
	}
	return hl.ShortHelpView(short)
}

// helpView is the help screen (?): the key groups of keyMap.FullHelp, as
// the documentation's key table (KeyTable) lists them, then the syntax
// notes, scrolled. Its help.Model also draws the hint line's short help.
type helpView struct {
	shown bool
	top   int // first line shown
	hl    help.Model

	devicesOnly bool   // Options.DevicesOnly: only the devices view's keys
	devices     bool   // Options.Devices is set: the devices view's note
	legend      string // the segment map's glyphs
}

func newHelpView(th *theme.Theme, o Options, legend string) helpView {
	v := helpView{hl: help.New(), devicesOnly: o.DevicesOnly, devices: o.Devices != nil, legend: legend}
	v.hl.ShowAll = true
	if th.ASCII {
		v.hl.ShortSeparator = " | "
		v.hl.FullSeparator = "   "
		v.hl.Ellipsis = "..."
	}
	return v
}

// open shows the help from its first line.
func (v *helpView) open() { v.shown, v.top = true, 0 }

// update scrolls the help; ? and esc close it.
func (v *helpView) update(c *paneCtx, msg tea.KeyMsg) {
	k := c.keys
	switch {
	case key.Matches(msg, k.Back, k.Help):
		v.shown = false
	case key.Matches(msg, k.Up):
		v.top--
	case key.Matches(msg, k.Down):
		v.top++
	case key.Matches(msg, k.PageUp):
		v.top -= v.page(c)
	case key.Matches(msg, k.PageDown), key.Matches(msg, k.Play):
		v.top += v.page(c)
	case key.Matches(msg, k.Home), key.Matches(msg, k.Start):
		v.top = 0
	case key.Matches(msg, k.EndList), key.Matches(msg, k.End):
		v.top = len(v.text(c))
	}
	v.top = clampInt(v.top, 0, max(0, len(v.text(c))-v.page(c)))
}

// page is how many help lines fit on the screen.
func (v *helpView) page(c *paneCtx) int { return max(1, c.h-headerRows-hintRows) }

// lines is the help screen from line top, body lines high.
func (v *helpView) lines(c *paneCtx, body int) []string {
	lines := v.text(c)
	top := clampInt(v.top, 0, max(0, len(lines)-body))
	lines = lines[top:]
	for len(lines) < body {
		lines = append(lines, "")
	}
	return lines[:body]
}

// text is the whole help screen: key groups, then the syntax notes.
func (v *helpView) text(c *paneCtx) []string {
	th := c.th
	lines := []string{th.Header.Render("npumon keys"), ""}
	groups := c.keys.FullHelp()
	if v.devicesOnly {
		k := c.keys
		groups = [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Start, k.End, k.Help, k.Quit}}
	}
	// The what-if view's keys (the last group) go after the notes.
	main, rest := groups, [][]key.Binding(nil)
	if !v.devicesOnly {
		main, rest = groups[:len(groups)-1], groups[len(groups)-1:]
	}
	lines = append(lines, v.columns(c, main)...)
	text := []string{
		"Filter (/): space-separated terms, all must hold: a regular expression on the op name, action " +
			"and stack frames; size>10MiB, size<=4KiB (KiB/MiB/GiB, or SI kB/MB/GB); stream=s1 (the events " +
			"pane's label) or stream=N (the full id). n and N jump to the next and previous match. Esc clears it.",
		"Jump (t): 15:04:05.123 (local clock), +1.5s (from the first entry), #N (the state after entry " +
			"index N, as the header's entry #N and stats count), or a raw cursor value. The segment map " +
			"shows the state after every entry at or before the cursor.",
		"Holders (h): the live allocations at the cursor grouped by call site (the first frame outside torch, " +
			"torch_npu, site-packages, the Python library and native code; else the autograd node or ATen op), stack, " +
			"op, stream, size or memory category (b); enter lists a group's allocations, v shows a whole stack (x unfolds its folded " +
			"library/native frames). C stacks the timeline by memory category. m sets mark A: holders then show the change from A to the cursor. " +
			"o lands on the next OOM's panel: verdict, figures, stack and top holders (docs/explain.md).",
		"Glyphs: " + v.legend + "; timeline " + timelineInfo(c) + ".",
	}
	if v.devices {
		text = append(text, "Devices (D): each NPU chip as npu-smi reports it (memory bar, power, temperature, "+
			"AICore, health) and the processes holding device memory. The producer's row is marked; its device "+
			"memory minus the allocator's reserved bytes is what it holds outside the caching allocator.")
	}
	if v.devicesOnly {
		text = text[len(text)-1:]
	}
	lines = append(lines, "")
	for _, t := range text {
		lines = append(lines, theme.Wrap(t, c.w)...)
	}
	for _, g := range rest {
		lines = append(lines, "", th.Dim.Render("In the what-if view (w):"))
		lines = append(lines, v.columns(c, [][]key.Binding{g})...)
	}
	return lines
}

// columns lays key groups out in order, as many side by side as fit
// the screen's width, each row of columns below the last; a group wider
// than the screen by itself gets its descriptions wrapped. No binding's
// text is ever cut, at any width.
func (v *helpView) columns(c *paneCtx, groups [][]key.Binding) []string {
	hl := v.hl
	hl.Width = 0
	var lines []string
	for i := 0; i < len(groups); {
		j := i + 1
		for j < len(groups) && blockWidth(hl.FullHelpView(groups[i:j+1])) <= c.w {
			j++
		}
		if i > 0 {
			lines = append(lines, "")
		}
		if block := hl.FullHelpView(groups[i:j]); blockWidth(block) <= c.w {
			lines = append(lines, strings.Split(block, "\n")...)
		} else {
			lines = append(lines, v.wrappedGroup(c, groups[i])...)
		}
		i = j
	}
	return lines
}

// wrappedGroup is one key group as a column of "key description" lines in
// the screen's width, a long description wrapped under itself.
func (v *helpView) wrappedGroup(c *paneCtx, g []key.Binding) []string {
	st := v.hl.Styles
	kw := 0
	for _, b := range g {
		if b.Enabled() {
			kw = max(kw, theme.Width(b.Help().Key))
		}
	}
	dw := max(c.w-kw-1, 8)
	var out []string
	for _, b := range g {
		if !b.Enabled() {
			continue
		}
		k := b.Help().Key
		k += strings.Repeat(" ", kw-theme.Width(k))
		for i, d := range theme.Wrap(b.Help().Desc, dw) {
			if i > 0 {
				k = strings.Repeat(" ", kw)
			}
			out = append(out, st.FullKey.Render(k)+" "+st.FullDesc.Render(d))
		}
	}
	return out
}

// blockWidth is the width of the widest line of a rendered block.
func blockWidth(s string) int {
	w := 0
	for _, l := range strings.Split(s, "\n") {
		w = max(w, theme.Width(l))
	}
	return w
}
