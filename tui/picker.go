package tui

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/internal/cells"
	"github.com/npumon/npumon/tui/theme"
)

// why is a capture's error without its path, which the picker's row
// already names.
func why(c *capture.Entry) string { return strings.ReplaceAll(c.Error, c.Path+": ", "") }

// Captures is a watched directory's list of captures (cmd/npumon hands in
// the watcher's, which lists capture.Entry rows); Options.Captures
// turns the capture picker on (key c). Both methods are called from the UI:
// List every tick while the picker is shown, Open off the UI goroutine.
type Captures interface {
	// List returns the captures in arrival order, oldest first.
	List() []capture.Entry
	// Open makes path the capture shown (decoding it into the Source).
	Open(path string) error
}

// pickerOpenedMsg reports the end of an Open started from the picker.
type pickerOpenedMsg struct {
	path string
	err  error
}

// picker is the capture picker overlay.
type picker struct {
	shown   bool
	list    []capture.Entry
	sel     int
	selPath string // the selection follows its capture as new ones land
	top     int
	opening string // path being opened
}

// refreshPicker re-reads the capture list, keeping the selection on its
// capture; it reports whether anything changed.
func (m *Model) refreshPicker() bool {
	if m.o.Captures == nil {
		return false
	}
	list := m.o.Captures.List()
	changed := !slices.Equal(list, m.vw.pick.list)
	m.vw.pick.list = list
	if m.vw.pick.selPath == "" {
		// start on the open capture, else the newest
		m.vw.pick.sel = len(list) - 1
		for i := range list {
			if list[i].Open {
				m.vw.pick.sel = i
			}
		}
	} else {
		for i := range list {
			if list[i].Path == m.vw.pick.selPath {
				m.vw.pick.sel = i
			}
		}
	}
	m.vw.pick.sel = clampInt(m.vw.pick.sel, 0, max(len(list)-1, 0))
	if len(list) > 0 {
		m.vw.pick.selPath = list[m.vw.pick.sel].Path
	}
	return changed
}

// onPickerKey handles keys while the picker is shown.
func (m *Model) onPickerKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Back, k.Captures):
		m.vw.pick.shown = false
	case key.Matches(msg, k.Up), key.Matches(msg, k.Down):
		d := 1
		if key.Matches(msg, k.Up) {
			d = -1
		}
		m.vw.pick.sel = clampInt(m.vw.pick.sel+d, 0, max(len(m.vw.pick.list)-1, 0))
	case key.Matches(msg, k.Start):
		m.vw.pick.sel = 0
	case key.Matches(msg, k.End):
		m.vw.pick.sel = max(len(m.vw.pick.list)-1, 0)
	case key.Matches(msg, k.Enter):
		if m.vw.pick.sel >= len(m.vw.pick.list) || m.vw.pick.opening != "" {
			return nil
		}
		path := m.vw.pick.list[m.vw.pick.sel].Path
		m.vw.pick.opening = path
		caps := m.o.Captures
		return func() tea.Msg { return pickerOpenedMsg{path: path, err: caps.Open(path)} }
	}
	if m.vw.pick.sel < len(m.vw.pick.list) {
		m.vw.pick.selPath = m.vw.pick.list[m.vw.pick.sel].Path
	}
	return nil
}

// onPickerOpened closes the picker once the chosen capture is shown.
func (m *Model) onPickerOpened(msg pickerOpenedMsg) {
	m.vw.pick.opening = ""
	m.dirty = true
	if msg.err != nil {
		m.sl.err = msg.err.Error()
		return
	}
	m.vw.pick.shown = false
	m.refreshPicker()
	m.startOver() // a new capture is new data
}

// openCapture is the capture shown and its number, for the header.
func (m *Model) openCapture() (capture.Entry, int, bool) {
	for i := len(m.vw.pick.list) - 1; i >= 0; i-- {
		if m.vw.pick.list[i].Open {
			return m.vw.pick.list[i], m.vw.pick.list[i].Index, true
		}
	}
	return capture.Entry{}, 0, false
}

// numberedCaptures is how many captures have a number (are not removed).
func (m *Model) numberedCaptures() int {
	n := 0
	for i := range m.vw.pick.list {
		if m.vw.pick.list[i].Index > 0 {
			n++
		}
	}
	return n
}

// capturesProblem is the waiting screen's line for a watched directory
// whose captures exist but none can be shown: all unreadable (the first
// error), or still being written; "" otherwise.
func (m *Model) capturesProblem() string {
	n, bad, writing := 0, 0, 0
	first := ""
	for i := range m.vw.pick.list {
		c := &m.vw.pick.list[i]
		if c.Index == 0 {
			continue
		}
		n++
		switch {
		case c.Writing:
			writing++
		case c.Error != "":
			bad++
			if first == "" {
				first = filepath.Base(c.Path) + ": " + why(c)
			}
		}
	}
	plural := func(k int) string {
		if k == 1 {
			return "1 capture"
		}
		return fmt.Sprintf("%d captures", k)
	}
	switch {
	case n == 0 || bad+writing < n:
		return ""
	case writing == 0:
		if n == 1 {
			return fmt.Sprintf("1 capture, unreadable: %s; c lists it", first)
		}
		return fmt.Sprintf("%s, all unreadable: %s; c lists them", plural(n), first)
	case bad == 0:
		return fmt.Sprintf("%s, still being written: it opens once complete; c lists them", plural(n))
	}
	return fmt.Sprintf("%s: %d unreadable (%s), %d still being written; c lists them", plural(n), bad, first, writing)
}

// sourceName is the header's source: the name given, and for a watched
// directory the capture shown in it.
func (m *Model) sourceName() string {
	name := m.o.SourceName
	if m.o.Captures == nil {
		return name
	}
	if c, i, ok := m.openCapture(); ok {
		return fmt.Sprintf("%s · %s (%d of %d)", name, filepath.Base(c.Path), i, m.numberedCaptures())
	}
	return fmt.Sprintf("%s · no capture open (%d found)", name, m.numberedCaptures())
}

// pickerLines draws the picker over the panes: one row per capture,
// oldest first, the selected one marked, the open one starred.
func (m *Model) pickerLines(body int) []string {
	th := m.th
	lines := []string{
		fit(th.Header.Render("Captures in "+m.o.SourceName)+th.Dim.Render(" · arrival order · ↑/↓ select · enter opens · esc closes"), m.w),
		th.Dim.Render(fmt.Sprintf("   %4s  %-8s  %-12s  %10s  %s", "#", "kind", "arrived", "size", "name")),
	}
	rows := body - len(lines)
	if len(m.vw.pick.list) == 0 {
		lines = append(lines, "   no snapshots or profiler directories yet; they appear here as they land")
	}
	if m.vw.pick.sel < m.vw.pick.top {
		m.vw.pick.top = m.vw.pick.sel
	}
	if rows > 0 && m.vw.pick.sel >= m.vw.pick.top+rows {
		m.vw.pick.top = m.vw.pick.sel - rows + 1
	}
	for i := m.vw.pick.top; i < len(m.vw.pick.list) && len(lines) < body; i++ {
		c := &m.vw.pick.list[i]
		mark := "  "
		if i == m.vw.pick.sel {
			mark = th.G.Selected + " "
		}
		open := " "
		if c.Open {
			open = "*"
		}
		num := "-" // removed: no number
		if c.Index > 0 {
			num = fmt.Sprint(c.Index)
		}
		row := fmt.Sprintf("%s%s%4s  %-8s  %-12s  %10s  ", mark, open, num, c.Kind,
			c.Arrived.In(m.o.Location).Format("15:04:05.000"), bytesize.Format(c.Size))
		var note string
		switch {
		case c.Path == m.vw.pick.opening:
			note = th.Dim.Render("  opening…")
		case c.Writing:
			note = th.Dim.Render("  being written…")
		case c.Error != "":
			note = th.Warn.Render("  " + why(c))
		case c.Open:
			note = th.Dim.Render("  (open)")
		}
		// the name gives way from its middle, down to 20 columns; past that
		// the note (an error's text) is cut at the screen's edge
		name := filepath.Base(c.Path)
		name = cells.TruncMiddle(name, max(20, m.w-theme.Width(row)-theme.Width(note)))
		row += name
		if i == m.vw.pick.sel {
			row = th.Header.Render(row)
		}
		row = fit(row+note, m.w)
		lines = append(lines, row)
	}
	for len(lines) < body {
		lines = append(lines, "")
	}
	return lines[:body]
}
