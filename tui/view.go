package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/npumon/npumon/monitor"
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
		if m.focus == paneTimeline {
			th = max(th, avail/2)
		}
		if th < 4 {
			th = 0
		}
		tl = rect{0, y, w, th}
		rest := rect{0, y + th, w, avail - th}
		switch m.focus {
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
	if len(m.ops) == 0 {
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
	_, tl, _, _, _ := m.layout()
	oldCols := m.tl.Columns()
	m.tl.SetSize(tl.w, max(0, tl.h-1))
	if m.hasData {
		if m.tl.Columns() != oldCols {
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
	lines = append(lines, m.headerLines()...)
	switch {
	case m.showHelp:
		lines = append(lines, m.helpLines(body)...)
	case m.loading || m.loadErr != nil:
		lines = append(lines, m.loadingLines(body)...)
	case !m.hasData:
		lines = append(lines, centered(body, m.w, "waiting for data…")...)
	default:
		lines = append(lines, m.bodyLines(body)...)
	}
	lines = append(lines, m.hintLine())
	for len(lines) < m.h {
		lines = append(lines, "")
	}
	lines = lines[:m.h]
	for i := range lines {
		if m.th.ASCII {
			lines[i] = toASCII(lines[i])
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
				grid[y] = fit(l, r.w)
			} else {
				grid[y] = fit(grid[y], r.x-1) + m.th.Dim.Render(m.th.G.VBar) + fit(l, r.w)
			}
		}
	}
	if tl.ok() {
		c := []string{m.title(paneTimeline, tl.w, compact, m.timelineInfo())}
		c = append(c, strings.Split(m.tl.View(), "\n")...)
		put(tl, c)
	}
	if seg.ok() {
		c := []string{m.title(paneSegments, seg.w, compact, "sort: "+m.seg.SortName()+" (s)")}
		detail := m.seg.Detail(m.o.Source.Stack, m.allocAtText())
		c = append(c, strings.Split(m.seg.View(seg.w, seg.h-1, detail), "\n")...)
		put(seg, c)
	}
	if ev.ok() {
		c := []string{m.title(paneEvents, ev.w, compact, m.filterInfo())}
		put(ev, append(c, m.eventLines(ev.w, ev.h-1)...))
	}
	if op.ok() {
		c := []string{m.title(paneOps, op.w, compact, "sort: "+opSortNames[m.opSort]+" (s)")}
		put(op, append(c, m.opLines(op.w, op.h-1)...))
	}
	return grid
}

func (m *Model) allocAtText() string {
	if b := m.seg.Block(); b != nil && b.Address == m.allocK {
		return m.allocAt
	}
	return ""
}

func (m *Model) filterInfo() string {
	if m.flt != nil {
		return "filter: " + m.flt.text
	}
	return ""
}

func (m *Model) timelineInfo() string {
	g := m.th.G
	info := fmt.Sprintf("%c allocated %c active %c reserved  %c step %c OOM", g.AllocArea, g.Active, g.Reserved, g.Step, g.OOM)
	if m.zoomed {
		info = "zoom " + m.spanText(m.win1-m.win0) + "  " + info
	}
	return info
}

func (m *Model) spanText(d int64) string {
	if m.base == monitor.TimeSequence {
		return strconv.FormatInt(d, 10) + " entries"
	}
	return fmtDurUS(d)
}

// title is a pane's first line: number and name (tabs in compact mode) and
// right-aligned info.
func (m *Model) title(p pane, w int, compact bool, info string) string {
	th := m.th
	var left string
	if compact {
		var parts []string
		for i := pane(0); i < numPanes; i++ {
			t := fmt.Sprintf("%d %s", i+1, paneNames[i])
			if i == m.focus {
				parts = append(parts, th.TitleFocused.Render("["+t+"]"))
			} else {
				parts = append(parts, th.Title.Render(" "+t+" "))
			}
		}
		if p != m.focus {
			parts = []string{th.Title.Render(fmt.Sprintf(" %d %s ", p+1, paneNames[p]))}
		}
		left = strings.Join(parts, "")
	} else {
		t := fmt.Sprintf(" %d %s ", p+1, paneNames[p])
		if p == m.focus {
			left = th.TitleFocused.Render("[" + strings.TrimSpace(t) + "]")
		} else {
			left = th.Title.Render(t)
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

func (m *Model) modeText() string {
	switch {
	case m.o.Live && m.follow:
		return "LIVE"
	case m.o.Live:
		return "PAUSED"
	case m.playing:
		return "REPLAY ×" + speedText(m.speed)
	}
	return "PAUSED ×" + speedText(m.speed)
}

func speedText(s float64) string { return strconv.FormatFloat(s, 'g', 4, 64) }

func (m *Model) headerLines() []string {
	th := m.th
	sep := th.Dim.Render("  " + th.G.VBar + "  ")
	if m.w < 120 {
		sep = th.Dim.Render(" " + th.G.VBar + " ")
	}
	name := m.o.SourceName
	if name == "" {
		name = "(no source)"
	}
	if m.w < 100 {
		name = shortName(name, 24)
	}
	wide := m.w >= 120
	var l1 []string
	if wide {
		l1 = append(l1, th.Header.Render("npumon"))
	}
	l1 = append(l1, name)
	switch {
	case m.hasData && m.dev < 0:
		l1 = append(l1, th.Header.Render(m.timeFmt().full(m.cursor)), th.Warn.Render("no allocator trace in this source"))
	case m.hasData && m.n == 0:
		l1 = append(l1, fmt.Sprintf("dev %d", m.dev), th.Warn.Render("no trace entries in this file"))
	case m.hasData:
		if wide {
			l1 = append(l1, fmt.Sprintf("dev %d (%d of %d)", m.dev, indexOf(m.devices, m.dev)+1, len(m.devices)))
			l1 = append(l1, th.Header.Render(m.timeFmt().full(m.cursor)))
		} else {
			l1 = append(l1, fmt.Sprintf("dev %d", m.dev), th.Header.Render(m.timeFmt().clock(m.cursor)))
		}
	}
	if m.hasData && m.base == monitor.TimeSequence {
		l1 = append(l1, th.Warn.Render("no timestamps in this file"))
	}
	mode := th.Mode.Render(m.modeText())
	if m.o.Live && !m.follow && m.hasData {
		behind := m.n - m.sum.Applied
		mode += " " + th.Warn.Render(fmt.Sprintf("%s behind (%d events)", m.spanText(m.last-m.cursor), behind))
	}
	l1 = append(l1, mode)
	if m.conn != ConnNone {
		c := m.conn.String()
		if m.connNote != "" {
			c += " " + m.connNote
		}
		if m.conn == ConnConnected {
			l1 = append(l1, th.Dim.Render(c))
		} else {
			l1 = append(l1, th.Warn.Render(c))
		}
	}
	var l2 string
	switch {
	case m.loading:
		l2 = th.Dim.Render("loading…")
	case m.hasData:
		s := m.sum
		parts := []string{
			"allocated " + fmtBytes(s.AllocatedBytes),
			"reserved " + fmtBytes(s.ReservedBytes),
			"active " + fmtBytes(s.ActiveBytes),
			"peak " + fmtBytes(s.PeakActiveBytes),
			fmt.Sprintf("frag %.0f%%", s.Fragmentation*100),
			fmt.Sprintf("entry %d/%d", s.Applied, m.n),
		}
		if m.w < 120 {
			parts = []string{
				fmt.Sprintf("entry %d/%d", s.Applied, m.n),
				"alloc " + fmtBytes(s.AllocatedBytes),
				"resv " + fmtBytes(s.ReservedBytes),
				"act " + fmtBytes(s.ActiveBytes),
				"peak " + fmtBytes(s.PeakActiveBytes),
				fmt.Sprintf("frag %.0f%%", s.Fragmentation*100),
			}
		}
		if s.OOMs > 0 {
			parts = append(parts, th.Warn.Render(fmt.Sprintf("OOM %d", s.OOMs)))
		}
		if d := m.dropped(); d > 0 {
			parts = append(parts, th.Warn.Render(fmt.Sprintf("%d entries dropped", d)))
		}
		if hbm, ok := m.hbm(); ok {
			parts = append(parts, hbm)
		}
		if m.hasOpAt {
			parts = append(parts, "op "+m.opAt.Name)
		}
		l2 = strings.Join(parts, "  ")
	}
	return []string{strings.Join(l1, sep), l2}
}

// shortName keeps the tail of a long path.
func shortName(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func (m *Model) hintLine() string {
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
	if m.showHelp {
		return th.Hint.Render("? or esc closes help · q quits")
	}
	hl := m.help
	hl.Width = m.w
	return hl.ShortHelpView(m.keys.ShortHelp())
}

func (m *Model) helpLines(body int) []string {
	th := m.th
	lines := []string{th.Header.Render("npumon keys"), ""}
	hl := m.help
	hl.Width = 0
	groups := m.keys.FullHelp()
	// As many key columns side by side as fit, the rest below.
	per := len(groups)
	for per > 1 && theme.Width(strings.Split(hl.FullHelpView(groups[:per]), "\n")[0]) > m.w {
		per /= 2
	}
	for i := 0; i < len(groups); i += per {
		if i > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, strings.Split(hl.FullHelpView(groups[i:min(i+per, len(groups))]), "\n")...)
	}
	text := []string{
		"Filter (/): space-separated terms, all must hold: a regular expression on the op name, action " +
			"and stack frames; size>10MiB, size<=4KiB (KiB/MiB/GiB); stream=N. Esc clears it.",
		"Jump (t): 15:04:05.123 (local clock), +1.5s (from the first entry), #N (entry number), or a raw " +
			"cursor value. The segment map shows the state after every entry at or before the cursor.",
		"Glyphs: " + m.seg.Legend() + "; timeline " + m.timelineInfo() + ".",
	}
	lines = append(lines, "")
	for _, t := range text {
		lines = append(lines, wrap(t, m.w)...)
	}
	for len(lines) < body {
		lines = append(lines, "")
	}
	return lines[:body]
}

// wrap breaks plain text into lines of at most w cells at spaces.
func wrap(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case theme.Width(line)+1+theme.Width(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}

func (m *Model) loadingLines(body int) []string {
	th := m.th
	if m.loadErr != nil {
		return centered(body, m.w, th.Warn.Render("error: "+m.loadErr.Error()), "", "q quits")
	}
	p := m.progress()
	stage := p.Stage
	if stage == "" {
		stage = "loading"
	}
	txt := fmt.Sprintf("%s %s", stage, m.o.SourceName)
	b := fmtBytes(p.BytesDone) + " decoded"
	if p.BytesTotal > 0 {
		b = fmt.Sprintf("%s of %s decoded (%.0f%%)", fmtBytes(p.BytesDone), fmtBytes(p.BytesTotal), 100*float64(p.BytesDone)/float64(p.BytesTotal))
	}
	return centered(body, m.w, txt, b, fmt.Sprintf("%d entries indexed", p.Entries), "", th.Dim.Render("q quits"))
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

// streamText keeps the stream column narrow: small ids as they are, stream
// handles (pointers in CUDA files) as their last hex digits.
func streamText(s uint64) string {
	if s < 1_000_000 {
		return strconv.FormatUint(s, 10)
	}
	h := strconv.FormatUint(s, 16)
	return "…" + h[len(h)-5:]
}

// eventLines lists the trace around the cursor; the entry at the cursor is marked.
func (m *Model) eventLines(w, h int) []string {
	th := m.th
	tf := m.timeFmt()
	timeW := 12
	if m.base == monitor.TimeSequence {
		timeW = 9
	}
	head := fmt.Sprintf("  %-*s %-15s %-14s %10s %6s  %s", timeW, "time", "action", "address", "size", "stream", "op")
	lines := []string{th.Dim.Render(head)}
	rows := h - 1
	if rows <= 0 {
		return lines[:max(0, h)]
	}
	if len(m.events) == 0 {
		msg := "no entries at this moment"
		if m.flt != nil {
			msg = "no entries near the cursor match the filter"
		}
		return append(lines, th.Dim.Render(msg))
	}
	cur := max(m.evCur, 0)
	start := clampInt(cur-rows/2, 0, max(0, len(m.events)-rows))
	for i := start; i < len(m.events) && i < start+rows; i++ {
		e := &m.events[i]
		mark := "  "
		if i == m.evCur {
			mark = th.G.Selected + " "
		}
		op := ""
		if m.base == monitor.TimeEpochUS {
			if o, ok := m.o.Source.OpAt(e.Time); ok {
				op = o.Name
			}
		}
		addr := ""
		if e.Addr != 0 {
			addr = fmt.Sprintf("0x%x", e.Addr)
		}
		l := fmt.Sprintf("%s%-*s %-15s %-14s %10s %6s  %s", mark, timeW, tf.clock(e.Time), e.Action, addr, fmtBytes(e.Size), streamText(e.Stream), op)
		if i == m.evCur {
			l = th.Selected.Render(fit(l, w))
		} else if e.Action.String() == "oom" {
			l = th.Warn.Render(l)
		}
		lines = append(lines, l)
	}
	return lines
}

// opLines is the op table.
func (m *Model) opLines(w, h int) []string {
	th := m.th
	tf := m.timeFmt()
	head := fmt.Sprintf("  %-12s %10s %10s %8s  %s", "start", "duration", "mem Δ", "thread", "name")
	lines := []string{th.Dim.Render(head)}
	rows := h - 1
	if rows <= 0 {
		return lines[:max(0, h)]
	}
	if len(m.opView) == 0 {
		msg := "no profiler ops in this source"
		if len(m.ops) > 0 {
			msg = "no ops match the filter"
		}
		return append(lines, th.Dim.Render(msg))
	}
	if m.opSel < m.opTop {
		m.opTop = m.opSel
	}
	if m.opSel >= m.opTop+rows {
		m.opTop = m.opSel - rows + 1
	}
	m.opTop = clampInt(m.opTop, 0, max(0, len(m.opView)-rows))
	for i := m.opTop; i < len(m.opView) && i < m.opTop+rows; i++ {
		o := &m.ops[m.opView[i]]
		mark := "  "
		if i == m.opSel {
			mark = th.G.Selected + " "
		}
		at := " "
		if m.cursor >= o.StartUS && m.cursor < o.EndUS {
			at = "*"
		}
		l := fmt.Sprintf("%s%-12s %10s %10s %8d %s%s", mark, tf.clock(o.StartUS), fmtDurUS(o.EndUS-o.StartUS), fmtDelta(o.MemDelta), o.Thread, at, o.Name)
		if i == m.opSel {
			l = th.Selected.Render(fit(l, w))
		}
		lines = append(lines, l)
	}
	return lines
}

// parseJump turns the `t` prompt into a cursor value.
func (m *Model) parseJump(s string) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return m.cursor, nil
	case strings.HasPrefix(s, "+"):
		if m.base == monitor.TimeSequence {
			n, err := strconv.ParseInt(s[1:], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("jump: %q: want +N entries (no timestamps in this file)", s)
			}
			return m.first + n, nil
		}
		d, err := time.ParseDuration(s[1:])
		if err != nil {
			return 0, fmt.Errorf("jump: %q: want a duration like +1.5s", s)
		}
		return m.first + d.Microseconds(), nil
	case strings.HasPrefix(s, "#"):
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("jump: %q: want #N, an entry number", s)
		}
		if m.base == monitor.TimeSequence {
			return n, nil
		}
		if n >= m.n {
			return 0, fmt.Errorf("jump: #%d: the log has %d entries", n, m.n)
		}
		// Binary search the smallest time at which entry n is applied;
		// EventsAround(t, 1, 0) is the last entry at or before t, O(log n).
		applied := func(t int64) int64 {
			evs := m.o.Source.EventsAround(m.dev, t, 1, 0)
			if len(evs) == 0 {
				return 0
			}
			return evs[0].Seq + 1
		}
		lo, hi := m.first-1, m.last // applied(lo) ≤ n < applied(hi)
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if applied(mid) > n {
				hi = mid
			} else {
				lo = mid
			}
		}
		c := hi
		return c, nil
	case strings.Contains(s, ":"):
		if m.base == monitor.TimeSequence {
			return 0, fmt.Errorf("jump: no timestamps in this file; use #N")
		}
		var t time.Time
		var err error
		for _, layout := range []string{"15:04:05.999999", "15:04:05", "15:04"} {
			if t, err = time.ParseInLocation(layout, s, m.o.Location); err == nil {
				break
			}
		}
		if err != nil {
			return 0, fmt.Errorf("jump: %q: want HH:MM:SS[.mmm]", s)
		}
		day := time.UnixMicro(m.cursor).In(m.o.Location)
		t = time.Date(day.Year(), day.Month(), day.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), m.o.Location)
		return t.UnixMicro(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("jump: %q: not a time (see ? for formats)", s)
	}
	return n, nil
}

// asciiReplacer maps the few non-ASCII characters of fixed texts (units,
// help arrows, separators); pane glyphs come from the theme already.
var asciiReplacer = strings.NewReplacer("×", "x", "µ", "u", "Δ", "d", "…", "...", "←", "<-", "→", "->",
	"↑", "up", "↓", "down", "•", "|", "─", "-", "│", "|", "┆", ":", "✗", "X", "█", "#", "▒", "+", "░", ".", "▶", ">", "·", ".")

// toASCII makes a line pure ASCII for --ascii; anything unforeseen becomes '?'.
func toASCII(s string) string {
	s = asciiReplacer.Replace(s)
	for _, r := range s {
		if r >= 0x80 {
			return strings.Map(func(r rune) rune {
				if r >= 0x80 {
					return '?'
				}
				return r
			}, s)
		}
	}
	return s
}

// fit pads or truncates a styled line to exactly w cells.
func fit(s string, w int) string { return theme.Fit(s, w) }
