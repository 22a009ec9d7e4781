package tui

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// eventsPane is the trace around the cursor (pane 3). It owns the entries
// it shows (load: around the cursor, filtered when a filter is set) and
// which of them the cursor stands after. The list follows the cursor, so
// ↑/↓ move time (from match to match while a filter is on) and the page
// keys move the cursor a page of entries.
type eventsPane struct {
	size
	events []store.Event
	cur    int // index of the entry at the cursor in events, -1 none
}

func newEventsPane() *eventsPane { return &eventsPane{cur: -1} }

func (p *eventsPane) update(c *paneCtx, msg tea.KeyMsg) (paneAct, bool) {
	k := c.keys
	if !key.Matches(msg, k.Up, k.Down) {
		return cursorKey(c, msg)
	}
	if c.flt != nil {
		return paneAct{kind: actMatch, n: dir(msg, k.Up)}, true
	}
	return paneAct{kind: actStep, n: dir(msg, k.Up)}, true
}

func (p *eventsPane) view(c *paneCtx) []string { return p.lines(c, p.w, p.h) }
func (p *eventsPane) info(c *paneCtx) string {
	if c.flt != nil {
		return "filter: " + c.flt.text
	}
	return ""
}
func (p *eventsPane) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.NextMatch, k.PrevMatch}
}

// load fetches the trace around the cursor, rows entries either side
// (filtered when a filter is set, from a wider span).
func (p *eventsPane) load(c *paneCtx, rows int) {
	before, after := rows, rows
	if c.flt != nil {
		before, after = 4000, 4000
	}
	var evs []store.Event
	if c.pos >= 0 {
		evs = c.src.EventsAroundSeq(c.dev, c.pos, before, after)
	} else {
		evs = c.src.EventsAround(c.dev, c.cursor, before, after)
	}
	if c.flt != nil {
		kept := evs[:0]
		for i := range evs {
			if c.matchEvent(&evs[i]) {
				kept = append(kept, evs[i])
			}
		}
		evs = kept
	}
	p.events = evs
	p.cur = -1
	for i := range evs {
		if evs[i].Seq < c.applied {
			p.cur = i
		}
	}
}

// current is the entry at the cursor, if the list holds it.
func (p *eventsPane) current() (*store.Event, bool) {
	if p.cur >= 0 && p.cur < len(p.events) {
		return &p.events[p.cur], true
	}
	return nil, false
}

// top is the first entry drawn in rows rows: the one at the cursor is
// kept mid-pane.
func (p *eventsPane) top(rows int) int {
	return clampInt(max(p.cur, 0)-rows/2, 0, max(0, len(p.events)-rows))
}

// rowAt is the entry drawn on row row (under the column header) of a
// list rows rows high.
func (p *eventsPane) rowAt(row, rows int) (store.Event, bool) {
	if row < 0 || row >= rows || len(p.events) == 0 {
		return store.Event{}, false
	}
	if i := p.top(rows) + row; i < len(p.events) {
		return p.events[i], true
	}
	return store.Event{}, false
}

// lines lists the trace around the cursor; the entry at the cursor is
// marked. Columns follow the pane: time, action and size always; the stream
// label (st) and, when there are ops, at least a few characters of the op;
// then the address when it fits. A line cut at the pane edge ends in "…".
func (p *eventsPane) lines(c *paneCtx, w, h int) []string {
	th := c.th
	tf := c.tf
	timeW := 12
	if c.base == store.TimeSequence {
		timeW = 9
	}
	const actionW, addrW, sizeW, opMin = 14, 14, 9, 8
	stW := c.streams.width()
	fixed := 2 + timeW + 1 + actionW + 1 + sizeW + 1 + stW
	need := fixed
	if c.hasOps {
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
	if len(p.events) == 0 {
		msg := "no entries at this moment"
		if c.flt != nil {
			msg = "no entries near the cursor match the filter"
		}
		return append(lines, th.Dim.Render(msg))
	}
	start := p.top(rows)
	for i := start; i < len(p.events) && i < start+rows; i++ {
		e := &p.events[i]
		mark := "  "
		if i == p.cur {
			mark = th.G.Selected + " "
		}
		op := ""
		if c.base == store.TimeEpochUS {
			if o, ok := c.src.OpOf(*e); ok {
				op = o.Name
			}
		}
		addr := ""
		if e.Addr != 0 {
			addr = fmt.Sprintf("0x%x", e.Addr)
		}
		size, stream := bytesize.Format(e.Size), c.streams.label(e.Stream)
		if store.IsMarker(e.Action) {
			// the state was replaced here (a new process, or a fresh
			// snapshot): a restart's Addr is the new pid
			addr, size, stream, op = "", "", "", "state resent"
			if e.Action == store.ActionRestart {
				addr, op = fmt.Sprintf("pid %d", e.Addr), fmt.Sprintf("new process, pid %d", e.Addr)
			}
		}
		l := row(mark, tf.clock(e.Time), actionName(e), addr, size, stream, op)
		if i == p.cur {
			l = th.Selected.Render(l)
		} else if e.Action == snapshot.ActionOOM || store.IsMarker(e.Action) {
			l = th.Warn.Render(l)
		}
		lines = append(lines, l)
	}
	return lines
}
