package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/internal/cells"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/tui/theme"
)

func (m *Model) modeText() string {
	switch {
	case m.o.Live && m.cur.follow:
		return "LIVE"
	case m.o.Live:
		return "PAUSED"
	case m.ld.loading && m.cur.follow:
		return "AT END" // of what is loaded, staying there as more lands
	case m.cur.playing:
		return "REPLAY ×" + speedText(m.cur.speed)
	}
	return "PAUSED ×" + speedText(m.cur.speed)
}

func speedText(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }

// headerLines is the header's two lines, and whether the connection's note
// did not fit the first (the hint line then carries it).
func (m *Model) headerLines() (lines []string, noteBelow bool) {
	th := m.th
	l1, nameAt, sep, noteBelow := m.line1()
	var l2 string
	switch {
	case m.ld.loading && !m.d.hasData:
		l2 = th.Dim.Render("loading…")
	case m.d.hasData:
		s := m.at.sum
		// The words mean what they mean in the JSON (docs/json.md):
		// allocated is the segment map's block sizes where there is one,
		// free frag is 1 − largest free / inactive ("—" without a segment
		// map), and a live client's peaks cover only what it has seen.
		alloc, frag := s.AllocatedBytes, "—"
		if s.Segments > 0 {
			alloc, frag = s.MapAllocatedBytes, fmt.Sprintf("%.0f%%", s.Fragmentation*100)
		}
		peak := "peak "
		if m.o.ConnState != nil {
			peak = "peak since attach "
		}
		parts := []string{
			"allocated " + bytesize.Format(alloc),
			"reserved " + bytesize.Format(s.ReservedBytes),
			"active " + bytesize.Format(s.ActiveBytes),
			peak + bytesize.Format(s.PeakActiveBytes),
			"free frag " + frag,
			m.entryText(),
		}
		if m.w < 120 {
			parts = []string{
				m.entryText(),
				"alloc " + bytesize.Format(alloc),
				"resv " + bytesize.Format(s.ReservedBytes),
				"act " + bytesize.Format(s.ActiveBytes),
				"free frag " + frag,
				peak + bytesize.Format(s.PeakActiveBytes),
			}
		}
		// Warnings go first so a narrow terminal never hides them.
		var warn []string
		if m.ld.loadErr != nil {
			warn = append(warn, th.Warn.Render("load failed: incomplete"))
		} else if m.ld.loading {
			// a streamed trace is indexed from an empty device until the
			// whole file is read (store.OwnedStream): what predates its
			// first entry (often every segment) is missing until then
			warn = append(warn, th.Warn.Render("provisional"))
		}
		if s.OOMs > 0 {
			warn = append(warn, th.Warn.Render(fmt.Sprintf("OOM %d", s.OOMs)))
		}
		switch d, holes := m.dropped(); {
		case holes > 0 && d == 0:
			warn = append(warn, th.Warn.Render("entries dropped"))
		case holes > 0: // some holes of unknown size
			warn = append(warn, th.Warn.Render(fmt.Sprintf("%d+ entries dropped", d)))
		case d > 0:
			warn = append(warn, th.Warn.Render(fmt.Sprintf("%d entries dropped", d)))
		}
		if n := m.newCapturesNote(); n != "" {
			warn = append(warn, th.Warn.Render(n))
		}
		if m.o.Note != nil {
			if n := m.o.Note(); n != "" {
				warn = append(warn, th.Warn.Render(n))
			}
		}
		// what a retention window thinned comes right after the warnings
		if n := m.retainNote(m.w >= 120); n != "" {
			warn = append(warn, th.Dim.Render(n))
		}
		parts = append(warn, parts...)
		if hbm, ok := m.hbm(); ok {
			parts = append(parts, hbm)
		}
		if m.at.hasOpAt {
			parts = append(parts, "op "+m.at.opAt.Name)
		}
		l2 = packParts(parts, m.w, slices.IndexFunc(parts, func(p string) bool { return strings.HasPrefix(p, "entry #") }))
	}
	// The source name gives way first, from the left: state, time and
	// device always show.
	l1[nameAt] = cells.TruncTail(l1[nameAt], max(12, m.w-line1Width(l1, nameAt, sep, 0)))
	return []string{strings.Join(l1, sep), l2}, noteBelow
}

// line1 is the header's first line as parts: the wide form (from 120
// columns) unless its fixed parts would not fit, then the compact one, so
// the connection's note shows. Where even that cannot hold the note of a
// client that is not connected (why, and when it retries), the line keeps
// the state word and noteBelow says the hint line carries the note.
func (m *Model) line1() (l1 []string, nameAt int, sep string, noteBelow bool) {
	l1, nameAt, sep = m.headerLine1(m.w >= 120, true)
	if m.w >= 120 && line1Width(l1, nameAt, sep, 12) > m.w {
		l1, nameAt, sep = m.headerLine1(false, true)
	}
	if m.sl.conn != wire.ConnNone && m.sl.conn != wire.ConnConnected && m.sl.connNote != "" && line1Width(l1, nameAt, sep, 12) > m.w {
		l1, nameAt, sep = m.headerLine1(false, false)
		noteBelow = true
	}
	return l1, nameAt, sep, noteBelow
}

// connText is the connection's state and note, as the header shows them.
func (m *Model) connText() string {
	if m.sl.connNote == "" {
		return m.sl.conn.String()
	}
	return m.sl.conn.String() + " " + m.sl.connNote
}

// headerLine1 is the header's first line, wide or compact, with or without
// the connection's note, as parts; the source name is parts[nameAt], whole.
func (m *Model) headerLine1(wide, note bool) (l1 []string, nameAt int, sep string) {
	th := m.th
	sep = th.Dim.Render("  " + th.G.VBar + "  ")
	if !wide {
		sep = th.Dim.Render(" " + th.G.VBar + " ")
	}
	name := m.sourceName()
	if name == "" {
		name = "(no source)"
	}
	if wide {
		l1 = append(l1, th.Header.Render("npumon"))
	}
	nameAt = len(l1)
	l1 = append(l1, name)
	switch {
	case m.d.hasData && m.d.dev < 0:
		l1 = append(l1, th.Header.Render(m.timeFmt().full(m.cur.cursor)), th.Warn.Render("no allocator trace in this source"))
	case m.d.hasData && m.d.n == 0:
		l1 = append(l1, fmt.Sprintf("dev %d", m.d.dev), th.Warn.Render("no trace entries in this file"))
	case m.d.hasData:
		if wide {
			l1 = append(l1, fmt.Sprintf("dev %d (%d of %d)", m.d.dev, slices.Index(m.d.devices, m.d.dev)+1, len(m.d.devices)))
			l1 = append(l1, th.Header.Render(m.timeFmt().full(m.cur.cursor)))
		} else {
			dev := fmt.Sprintf("dev %d", m.d.dev)
			if len(m.d.devices) > 1 {
				dev += fmt.Sprintf(" (%d of %d)", slices.Index(m.d.devices, m.d.dev)+1, len(m.d.devices))
			}
			l1 = append(l1, dev, th.Header.Render(m.timeFmt().clock(m.cur.cursor)))
		}
	}
	if m.d.hasData && m.d.base == store.TimeSequence {
		l1 = append(l1, th.Warn.Render("no timestamps in this file"))
	}
	mode := th.Mode.Render(m.modeText())
	if m.o.Live && !m.cur.follow && m.d.hasData {
		behind := m.d.n - m.at.sum.Applied
		mode += " " + th.Warn.Render(fmt.Sprintf("%s behind (%d events)", m.spanText(m.d.last-m.cur.cursor), behind))
	}
	l1 = append(l1, mode)
	if m.sl.conn != wire.ConnNone {
		c := m.sl.conn.String()
		if note {
			c = m.connText()
		}
		if m.sl.conn == wire.ConnConnected {
			l1 = append(l1, th.Dim.Render(c))
		} else {
			l1 = append(l1, th.Warn.Render(c))
		}
	}
	return l1, nameAt, sep
}

// line1Width is the width of l1 joined by sep with its name part counted
// as nameWidth columns.
func line1Width(l1 []string, nameAt int, sep string, nameWidth int) int {
	w := theme.Width(sep)*(len(l1)-1) + nameWidth
	for i, p := range l1 {
		if i != nameAt {
			w += theme.Width(p)
		}
	}
	return w
}

// entryText is the header's position; while loading the count is of what
// has loaded so far ("+": more to come), as are the figures.
func (m *Model) entryText() string {
	t := entryText(m.at.sum.Applied, m.d.n)
	if m.ld.loading {
		t += "+"
	}
	return t
}

// entryText is the header's position: the index of the last entry applied
// (the index stats, holders and `t #N` use) of the log's n entries, "–"
// before the first.
func entryText(applied, n int64) string {
	if applied <= 0 {
		return fmt.Sprintf("entry #–/%d", n)
	}
	return fmt.Sprintf("entry #%d/%d", applied-1, n)
}

// packParts joins header parts in order, leaving out those that would not
// fit in w columns rather than cutting one in the middle; parts[keep] (if
// keep ≥ 0) is never left out.
func packParts(parts []string, w, keep int) string {
	var sb strings.Builder
	used, reserved := 0, 0
	if keep >= 0 {
		reserved = 2 + theme.Width(parts[keep])
	}
	for i, p := range parts {
		pw := theme.Width(p)
		gap := 0
		if used > 0 {
			gap = 2
		}
		if i == keep {
			reserved = 0
		}
		if i != keep && used+gap+pw+reserved > w {
			continue
		}
		if gap > 0 {
			sb.WriteString("  ")
		}
		sb.WriteString(p)
		used += gap + pw
	}
	return sb.String()
}
