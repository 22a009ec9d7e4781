package tui

import (
	"fmt"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// eventRows is how many event rows the events pane can show.
func (m *Model) eventRows() int {
	_, _, _, ev, _ := m.layout()
	return max(1, ev.h-2)
}

// loadEvents fetches the trace around the cursor (filtered when a filter is set).
func (m *Model) loadEvents() {
	rows := m.eventRows()
	before, after := rows, rows
	if m.flt != nil {
		before, after = 4000, 4000
	}
	var evs []store.Event
	if m.pos >= 0 {
		evs = m.o.Source.EventsAroundSeq(m.dev, m.pos, before, after)
	} else {
		evs = m.o.Source.EventsAround(m.dev, m.cursor, before, after)
	}
	if m.flt != nil {
		kept := evs[:0]
		for i := range evs {
			e := &evs[i]
			if m.flt.matchEvent(e, &m.streams, func() string { return m.eventText(e) }) {
				kept = append(kept, *e)
			}
		}
		evs = kept
	}
	m.events = evs
	m.evCur = -1
	for i := range evs {
		if evs[i].Seq < m.sum.Applied {
			m.evCur = i
		}
	}
}

// eventText is what a regex filter searches besides the action: the op
// running at the event and its stack frames.
func (m *Model) eventText(e *store.Event) string {
	var sb strings.Builder
	if m.base == store.TimeEpochUS {
		if op, ok := m.o.Source.OpOf(*e); ok {
			sb.WriteString(op.Name)
			sb.WriteByte('\n')
		}
	}
	for _, f := range m.o.Source.Stack(e.Frames) {
		fmt.Fprintf(&sb, "%s:%d:%s\n", f.Filename, f.Line, f.Name)
	}
	return sb.String()
}

// eventLines lists the trace around the cursor; the entry at the cursor is
// marked. Columns follow the pane: time, action and size always; the stream
// label (st) and, when there are ops, at least a few characters of the op;
// then the address when it fits. A line cut at the pane edge ends in "…".
func (m *Model) eventLines(w, h int) []string {
	th := m.th
	tf := m.timeFmt()
	timeW := 12
	if m.base == store.TimeSequence {
		timeW = 9
	}
	const actionW, addrW, sizeW, opMin = 14, 14, 9, 8
	stW := m.streams.width()
	fixed := 2 + timeW + 1 + actionW + 1 + sizeW + 1 + stW
	need := fixed
	if len(m.ops) > 0 {
		need += 2 + opMin
	}
	showAddr := w >= need+1+addrW
	row := func(mark, tm, action, addr, size, stream, op string) string {
		l := fmt.Sprintf("%s%-*s %-*s ", mark, timeW, tm, actionW, action)
		if showAddr {
			l += fmt.Sprintf("%-*s ", addrW, addr)
		}
		l += fmt.Sprintf("%*s %-*s", sizeW, size, stW, stream)
		if op != "" {
			l += "  " + op
		}
		return th.Fit(l, w)
	}
	head := row("  ", "time", "action", "address", "size", "st", "op")
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
		if m.base == store.TimeEpochUS {
			if o, ok := m.o.Source.OpOf(*e); ok {
				op = o.Name
			}
		}
		addr := ""
		if e.Addr != 0 {
			addr = fmt.Sprintf("0x%x", e.Addr)
		}
		size, stream := bytesize.Format(e.Size), m.streams.label(e.Stream)
		if store.IsMarker(e.Action) {
			// the state was replaced here (a new process, or a fresh
			// snapshot): a restart's Addr is the new pid
			addr, size, stream, op = "", "", "", "state resent"
			if e.Action == store.ActionRestart {
				addr, op = fmt.Sprintf("pid %d", e.Addr), fmt.Sprintf("new process, pid %d", e.Addr)
			}
		}
		l := row(mark, tf.clock(e.Time), actionName(e), addr, size, stream, op)
		if i == m.evCur {
			l = th.Selected.Render(l)
		} else if e.Action == snapshot.ActionOOM || store.IsMarker(e.Action) {
			l = th.Warn.Render(l)
		}
		lines = append(lines, l)
	}
	return lines
}
