package tui

import (
	"path/filepath"
	"strings"

	"github.com/charmbracelet/bubbles/key"

	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/tui/theme"
	tuiwhatif "github.com/npumon/npumon/tui/whatif"
)

// hintLine is the bottom line; noteBelow: the header had no room for the
// connection's note, which then goes here.
func (m *Model) hintLine(noteBelow bool) string {
	th := m.th
	switch m.input {
	case inputFilter:
		return th.Key.Render("/") + " " + m.ti.View() + th.Dim.Render("   regex · size>10MiB · stream=N · enter applies · esc cancels")
	case inputJump:
		return th.Key.Render("jump to") + " " + m.ti.View() + th.Dim.Render("   15:04:05.123 · +1.5s · #entry · raw value · enter/esc")
	}
	if m.statusErr != "" {
		return th.Warn.Render(m.statusErr)
	}
	switch m.screen() {
	case screenHelp:
		if len(m.helpText()) > m.helpPage() {
			return th.Hint.Render("↑/↓ pgup/pgdn scroll · ? or esc closes help · q quits")
		}
		return th.Hint.Render("? or esc closes help · q quits")
	case screenDevices:
		return th.Hint.Render(m.devicesHint())
	case screenPicker:
		// a narrow row cuts a capture's error: the selected one's shows whole here
		if i := m.pick.sel; i >= 0 && i < len(m.pick.list) && m.pick.list[i].Error != "" {
			e := ": " + why(&m.pick.list[i])
			return th.Warn.Render(fit(explain.TruncMiddle(filepath.Base(m.pick.list[i].Path), max(12, m.w-theme.Width(e)))+e, m.w))
		}
		return th.Hint.Render("↑/↓ select · enter opens · esc closes · q quits")
	case screenWhatIf:
		return th.Hint.Render(tuiwhatif.Hint + " · q quits")
	case screenView:
		return th.Hint.Render(m.viewHint())
	}
	if noteBelow { // a narrow header has no room for why
		return th.Warn.Render(m.connText()) + th.Hint.Render(" · ? help")
	}
	hl := m.help
	hl.Width = m.w
	short := m.keys.ShortHelp()
	if m.o.Captures != nil {
		short = append([]key.Binding{m.keys.Captures}, short...)
	}
	if m.hasData && (m.sum.OOMs > 0 || m.oomAhead) { // the source has an OOM: say first how to see why
		short = append([]key.Binding{m.keys.NextOOM}, short...)
	}
	return hl.ShortHelpView(short)
}

// helpPage is how many help lines fit on the screen.
func (m *Model) helpPage() int { return max(1, m.h-headerRows-hintRows) }

// helpLines is the help screen from line helpTop, body lines high.
func (m *Model) helpLines(body int) []string {
	lines := m.helpText()
	top := clampInt(m.helpTop, 0, max(0, len(lines)-body))
	lines = lines[top:]
	for len(lines) < body {
		lines = append(lines, "")
	}
	return lines[:body]
}

// helpText is the whole help screen: key groups, then the syntax notes.
func (m *Model) helpText() []string {
	th := m.th
	lines := []string{th.Header.Render("npumon keys"), ""}
	hl := m.help
	hl.Width = 0
	groups := m.keys.FullHelp()
	if m.o.DevicesOnly {
		k := m.keys
		groups = [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Start, k.End, k.Help, k.Quit}}
	}
	// As many key columns side by side as fit, the rest below.
	// The what-if view's keys (the last group) go after the notes.
	main, rest := groups, [][]key.Binding(nil)
	if !m.o.DevicesOnly {
		main, rest = groups[:len(groups)-1], groups[len(groups)-1:]
	}
	per := len(main)
	for per > 1 && theme.Width(strings.Split(hl.FullHelpView(main[:per]), "\n")[0]) > m.w {
		per /= 2
	}
	groups = main
	for i := 0; i < len(groups); i += per {
		if i > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, strings.Split(hl.FullHelpView(groups[i:min(i+per, len(groups))]), "\n")...)
	}
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
		"Glyphs: " + m.seg.Legend() + "; timeline " + m.timelineInfo() + ".",
	}
	if m.o.Devices != nil {
		text = append(text, "Devices (D): each NPU chip as npu-smi reports it (memory bar, power, temperature, "+
			"AICore, health) and the processes holding device memory. The producer's row is marked; its device "+
			"memory minus the allocator's reserved bytes is what it holds outside the caching allocator.")
	}
	if m.o.DevicesOnly {
		text = text[len(text)-1:]
	}
	lines = append(lines, "")
	for _, t := range text {
		lines = append(lines, theme.Wrap(t, m.w)...)
	}
	for _, g := range rest {
		lines = append(lines, "", th.Dim.Render("In the what-if view (w):"))
		lines = append(lines, strings.Split(hl.FullHelpView([][]key.Binding{g}), "\n")...)
	}
	return lines
}
