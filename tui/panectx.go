package tui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

// paneCtx is what the root Model hands the main screen's panes instead of
// itself: the theme and keys, the Source and device, and the one cursor,
// read-only. A pane changes its own state; what belongs to the root (the
// cursor, the timeline's highlight, the status line) it asks for with a
// paneAct. Built afresh for each call (Model.paneCtx), so it is never stale.
type paneCtx struct {
	th      *theme.Theme
	keys    *keyMap
	src     Source
	dev     int
	base    store.TimeBase
	cursor  int64
	pos     int64 // entries applied when the cursor was set by position; -1: all at cursor's time
	applied int64 // entries applied at the cursor (Summary.Applied)
	tf      timeFmt
	flt     *filter       // nil: no filter
	streams *streamLabels // the device's stream labels
	zoom    int64         // the timeline window's span when zoomed, 0 when it shows the whole range
	hasOps  bool          // the Source has profiler ops
	w, h    int           // the screen (full-screen views)
	whatIf  bool          // a what-if view can be opened (Options.WhatIf)
}

// paneCtx is the context the panes get now.
func (m *Model) paneCtx() *paneCtx {
	c := &paneCtx{
		th: m.th, keys: &m.keys, src: m.o.Source, dev: m.d.dev, base: m.d.base,
		cursor: m.cur.cursor, pos: m.cur.pos, applied: m.at.sum.Applied, tf: m.timeFmt(),
		flt: m.pr.flt, streams: &m.d.streams, hasOps: m.p.ops.count() > 0,
		w: m.w, h: m.h, whatIf: m.o.WhatIf != nil,
	}
	if m.p.tl.zoomed {
		c.zoom = m.p.tl.span()
	}
	return c
}

// spanText is a duration or entry count in the Source's time base.
func (c *paneCtx) spanText(d int64) string { return spanText(c.base, d) }

// eventText is what a regex filter searches besides the action: the op
// running at the event and its stack frames.
func (c *paneCtx) eventText(e *store.Event) string {
	var sb strings.Builder
	if c.base == store.TimeEpochUS {
		if op, ok := c.src.OpOf(*e); ok {
			sb.WriteString(op.Name)
			sb.WriteByte('\n')
		}
	}
	for _, f := range c.src.Stack(e.Frames) {
		fmt.Fprintf(&sb, "%s:%d:%s\n", f.Filename, f.Line, f.Name)
	}
	return sb.String()
}

// matchEvent reports whether the filter (which must be set) keeps e.
func (c *paneCtx) matchEvent(e *store.Event) bool {
	return c.flt.matchEvent(e, c.streams, func() string { return c.eventText(e) })
}

// actKind is what a pane asks of the root.
type actKind int

const (
	actNone   actKind = iota
	actStep           // step the cursor n entries (±1; Model.stepEvent)
	actMatch          // move the cursor to the next (n > 0) or previous filter match
	actPage           // move the cursor a page of entries back (n < 0) or forward
	actStart          // move the cursor to the initial state
	actEnd            // move the cursor to the end
	actNote           // say note on the status line
	actGoToOp         // highlight op on the timeline and move the cursor to its start
)

// paneAct is a pane's request to the root, which owns the cursor, the
// timeline and the status line; cmd, when set, runs off the UI goroutine.
type paneAct struct {
	kind actKind
	n    int
	op   store.Op
	note string
	cmd  tea.Cmd
}

// noteAct asks for note on the status line ("": nothing).
func noteAct(note string) paneAct {
	if note == "" {
		return paneAct{}
	}
	return paneAct{kind: actNote, note: note}
}

// apply carries out what a pane asked for.
func (m *Model) apply(a paneAct) tea.Cmd {
	switch a.kind {
	case actStep:
		m.stepEvent(a.n)
	case actMatch:
		m.jumpMatch(a.n)
	case actPage:
		_, _, _, ev, _ := m.layout()
		for range max(1, ev.h-3) {
			m.stepEvent(a.n)
		}
	case actStart:
		m.setCursor(m.d.first - 1)
	case actEnd:
		m.toEnd()
	case actNote:
		m.sl.err = a.note
	case actGoToOp:
		m.p.tl.tl.SetHighlight(a.op.StartUS, a.op.EndUS, true)
		if m.d.base == store.TimeEpochUS {
			sel := m.p.ops.selected()
			m.setCursor(a.op.StartUS)
			m.p.ops.selectRow(sel) // the op chosen, not another one starting at the same time
		}
	}
	return a.cmd
}
