package tui

import (
	"fmt"
	"math"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/tui/theme"
)

// This file holds the full-screen views that explain memory
// (docs/explain.md): holders at the cursor (h), a group's allocations
// (enter), the whole stack of a block, event, group or allocation (v), and
// the OOM panel (o). Views stack: esc goes back one. Mark A (m) turns the
// holders view into the change from the mark to the cursor.

type viewKind int

const (
	viewHolders viewKind = iota
	viewAllocs           // the allocations of one holders group
	viewStack            // one stack, full screen
	viewOOM              // the OOM panel
)

// xview is one open view.
type xview struct {
	kind     viewKind
	sel, top int
	group    string         // viewAllocs: the group key
	title    []string       // viewStack: what the stack belongs to
	frames   snapshot.Stack // viewStack
	unfold   bool           // viewStack: every frame, none folded (x)
	oom      *oomFacts      // viewOOM
}

// explainUI is the explain views: their stack and the holders at the
// cursor. It draws, settles and takes keys on the shared paneCtx; what it
// wants of the root (a status note) it returns as a paneAct.
type explainUI struct {
	views []xview // open views, innermost last
	by    explain.By

	// holders at the cursor (recomputed when it moves)
	at      int64 // position (entries applied) they are for; -1: none
	dev     int
	live    []replay.Alloc
	groups  []explain.Group
	diff    []explain.DiffGroup
	active  int64
	markN   int64 // mark A's position; -1: no mark
	markDev int
	markT   int64 // its cursor, for the title
	markLv  []replay.Alloc
}

// oomFacts are what the OOM panel shows for one oom entry.
type oomFacts struct {
	seq                 int64
	time                int64
	requested, free     int64
	fig                 explain.Figures // the segment map right after the entry
	verdict, reason, op string
	frames              snapshot.Stack
	top                 []explain.Group
}

func newExplainUI() explainUI { return explainUI{by: explain.ByCallsite, at: -1, markN: -1} }

func (x *explainUI) open() bool { return len(x.views) > 0 }

func (x *explainUI) top() *xview { return &x.views[len(x.views)-1] }

func (x *explainUI) push(v xview) { x.views = append(x.views, v) }

// position is the number of entries applied at the cursor.
func (c *paneCtx) position() int64 {
	if c.pos >= 0 {
		return c.pos
	}
	return c.applied
}

func (x *explainUI) grouper(c *paneCtx) *explain.Grouper {
	src := c.src
	g := &explain.Grouper{By: x.by, Stack: src.Stack}
	if c.base == store.TimeEpochUS {
		g.OpOf = src.OpName
	}
	if g.By == explain.ByCategory && c.dev >= 0 {
		g.Category = explain.CategoryOf(src.Categories(c.dev))
	}
	return g
}

// refreshHolders recomputes the holders (and the change from mark A) at
// the cursor when it moved.
func (x *explainUI) refreshHolders(c *paneCtx, force bool) {
	if c.dev < 0 {
		return
	}
	n := c.position()
	if !force && n == x.at && c.dev == x.dev {
		return
	}
	x.at, x.dev = n, c.dev
	x.live = c.src.LiveAtSeq(c.dev, n)
	g := x.grouper(c)
	x.active = 0
	for i := range x.live {
		x.active += x.live[i].Size
	}
	x.groups = g.Group(x.live, x.active)
	x.diff = nil
	if x.markN >= 0 && x.markDev == c.dev {
		x.diff = explain.DiffAllocs(g, x.markLv, x.live, true)
	}
}

// setMark sets mark A at the cursor, or clears it when it is already
// there, and says which on the status line.
func (x *explainUI) setMark(c *paneCtx) paneAct {
	if c.dev < 0 {
		return noteAct("marks need a device trace")
	}
	n := c.position()
	note := ""
	if x.markN == n && x.markDev == c.dev {
		x.markN, x.markLv = -1, nil
		note = "mark A cleared"
	} else {
		x.markN, x.markDev, x.markT = n, c.dev, c.cursor
		x.markLv = c.src.LiveAtSeq(c.dev, n)
		note = fmt.Sprintf("mark A set at %s: holders (h) show the change from it", posText(n))
	}
	x.refreshHolders(c, true)
	return noteAct(note)
}

// openHolders opens the holders view at the cursor.
func (x *explainUI) openHolders(c *paneCtx) paneAct {
	if c.dev < 0 {
		return noteAct("holders need a device trace")
	}
	x.views = []xview{{kind: viewHolders}}
	x.refreshHolders(c, true)
	return paneAct{}
}

// setMark and openHolders are the m and h keys on the main screen.
func (m *Model) setMark()     { m.apply(m.vw.x.setMark(m.paneCtx())) }
func (m *Model) openHolders() { m.apply(m.vw.x.openHolders(m.paneCtx())) }

// openStack opens the full-screen stack of what is selected: a group or
// allocation in a view, else the selected block (segments pane) or the
// event at the cursor.
func (m *Model) openStack() {
	src := m.o.Source
	if m.vw.x.open() {
		m.vw.x.openStack(m.paneCtx())
		return
	}
	switch m.p.focus {
	case paneSegments:
		s, b := m.p.seg.seg.Segment(), m.p.seg.seg.Block()
		switch {
		case b != nil:
			m.vw.x.push(xview{kind: viewStack, title: []string{fmt.Sprintf("block 0x%x  %s  %s", b.Address, bytesize.Format(b.Size), b.State)}, frames: src.Stack(b.Frames)})
		case s != nil:
			m.vw.x.push(xview{kind: viewStack, title: []string{fmt.Sprintf("segment 0x%x  %s", s.Address, bytesize.Format(s.TotalSize))}, frames: src.Stack(s.Frames)})
		}
	default:
		if e, ok := m.p.ev.current(); ok {
			m.vw.x.push(xview{kind: viewStack, title: []string{fmt.Sprintf("entry #%d  %s  0x%x  %s", e.Seq, actionName(e), e.Addr, bytesize.Format(e.Size))}, frames: src.Stack(e.Frames)})
		} else {
			m.sl.err = "no event at the cursor"
		}
	}
}

// openStack opens the full-screen stack of the group or allocation
// selected in the open view.
func (x *explainUI) openStack(c *paneCtx) {
	src := c.src
	v := x.top()
	switch v.kind {
	case viewHolders:
		if k, a, ok := x.selectedGroupAlloc(v.sel); ok {
			x.push(xview{kind: viewStack, title: []string{"group " + x.fitKey(k, c.w-6), fmt.Sprintf("its largest allocation: %s at 0x%x", bytesize.Format(a.Size), a.Addr)}, frames: src.Stack(a.Frames)})
		}
	case viewAllocs:
		if al := x.groupAllocs(v.group); v.sel < len(al) {
			a := al[v.sel]
			x.push(xview{kind: viewStack, title: []string{fmt.Sprintf("allocation 0x%x  %s  %s", a.Addr, bytesize.Format(a.Size), bornText(a)), "group " + x.fitKey(v.group, c.w-6)}, frames: src.Stack(a.Frames)})
		}
	case viewOOM:
		o := v.oom
		x.push(xview{kind: viewStack, title: []string{fmt.Sprintf("the failing request: %s at entry #%d", bytesize.Format(o.requested), o.seq)}, frames: o.frames})
	}
}

func bornText(a replay.Alloc) string {
	if a.Born < 0 {
		return "allocated before the trace"
	}
	return fmt.Sprintf("allocated at entry #%d", a.Born)
}

// selectedGroupAlloc is the key and largest allocation of row i of the
// holders view (groups, or the diff's groups with a mark).
func (x *explainUI) selectedGroupAlloc(i int) (string, replay.Alloc, bool) {
	key := ""
	if x.diff != nil {
		if i >= len(x.diff) {
			return "", replay.Alloc{}, false
		}
		key = x.diff[i].Key
	} else {
		if i >= len(x.groups) {
			return "", replay.Alloc{}, false
		}
		key = x.groups[i].Key
	}
	al := x.groupAllocs(key)
	if len(al) == 0 {
		return key, replay.Alloc{}, false
	}
	return key, al[0], true
}

// groupAllocs lists the live allocations of a group at the cursor, largest first.
func (x *explainUI) groupAllocs(key string) []replay.Alloc {
	for i := range x.groups {
		if x.groups[i].Key == key {
			return x.groups[i].Allocs
		}
	}
	return nil
}

// openOOM moves to the next oom entry after the cursor and opens its panel;
// past the last one (a live view following the newest entry), to the last.
func (m *Model) openOOM() {
	src := m.o.Source
	c, ok := src.Next(m.d.dev, m.cur.cursor, snapshot.ActionOOM)
	if !ok && !m.vw.x.open() {
		c, ok = src.Prev(m.d.dev, m.cur.cursor+1, snapshot.ActionOOM)
	}
	if !ok {
		m.sl.err = "no OOM after the cursor"
		if _, any := src.Next(m.d.dev, math.MinInt64, snapshot.ActionOOM); !any {
			m.sl.err = "no OOM in this source"
		}
		return
	}
	m.setCursor(c)
	var e *store.Event
	evs := src.EventsAround(m.d.dev, c, 512, 0)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Action == snapshot.ActionOOM && evs[i].Time <= c {
			e = &evs[i]
			break
		}
	}
	if e == nil {
		return
	}
	m.cur.pos = e.Seq + 1 // stand right after the oom entry
	m.refreshCursor()
	m.vw.x.views = []xview{{kind: viewOOM, oom: m.oomFacts(e)}}
}

// oomFacts gathers the panel's figures at the state right after entry e.
func (m *Model) oomFacts(e *store.Event) *oomFacts {
	src := m.o.Source
	f := &oomFacts{seq: e.Seq, time: e.Time, requested: e.Size, free: e.DeviceFree, frames: src.Stack(e.Frames)}
	st := src.StateAtSeq(m.d.dev, e.Seq+1)
	fig := explain.StateFigures(st.Segments)
	f.fig = fig
	f.verdict = fig.Verdict(f.requested, f.free)
	f.reason = fig.Reason(f.requested, f.free, bytesize.Format)
	if m.o.MemUsage != nil {
		for _, mu := range m.o.MemUsage() {
			if mu.Device == m.d.dev {
				// the modules' memory (torch_npu's memUsageInfo beside the capture)
				out := explain.NewOutside(mu, "")
				f.reason += "; " + out.Sentence(f.verdict == "shortage", fig, f.free, bytesize.Format)
				break
			}
		}
	}
	if m.d.base == store.TimeEpochUS {
		if op, ok := src.OpOf(*e); ok {
			f.op = op.Name
		}
	}
	f.top = m.vw.x.grouper(m.paneCtx()).Group(src.LiveAtSeq(m.d.dev, e.Seq+1), 0)
	if len(f.top) > 5 {
		f.top = f.top[:5]
	}
	return f
}

// onViewKey handles keys while a view is open; false: not handled (the
// cursor keys fall through to the main handler).
func (x *explainUI) onViewKey(c *paneCtx, msg tea.KeyMsg) (paneAct, bool) {
	k := c.keys
	v := x.top()
	rows := x.viewRows(v)
	switch {
	case key.Matches(msg, k.Back):
		x.views = x.views[:len(x.views)-1]
	case key.Matches(msg, k.Holders):
		if v.kind == viewHolders {
			x.views = nil
		} else {
			return x.openHolders(c), true
		}
	case key.Matches(msg, k.Up), key.Matches(msg, k.Down):
		d := 1
		if key.Matches(msg, k.Up) {
			d = -1
		}
		v.sel = clampInt(v.sel+d, 0, max(0, rows-1))
	case key.Matches(msg, k.PageUp), key.Matches(msg, k.PageDown):
		d := max(1, c.h-8)
		if key.Matches(msg, k.PageUp) {
			d = -d
		}
		v.sel = clampInt(v.sel+d, 0, max(0, rows-1))
	case key.Matches(msg, k.Enter):
		switch v.kind {
		case viewHolders:
			if gk, _, ok := x.selectedGroupAlloc(v.sel); ok {
				x.push(xview{kind: viewAllocs, group: gk})
			}
		case viewAllocs:
			x.openStack(c)
		}
	case key.Matches(msg, k.Stack):
		x.openStack(c)
	case key.Matches(msg, k.Unfold):
		if v.kind == viewStack {
			v.unfold = !v.unfold
			v.sel = 0
		}
	case key.Matches(msg, k.GroupBy):
		if v.kind == viewHolders {
			i := 0
			for j, b := range explain.Bys {
				if b == x.by {
					i = j
				}
			}
			x.by = explain.Bys[(i+1)%len(explain.Bys)]
			v.sel, v.top = 0, 0
			x.refreshHolders(c, true)
		}
	case key.Matches(msg, k.Mark):
		return x.setMark(c), true
	case key.Matches(msg, k.Tab), key.Matches(msg, k.BackTab), key.Matches(msg, k.Pane1), key.Matches(msg, k.Pane2),
		key.Matches(msg, k.Pane3), key.Matches(msg, k.Pane4):
		x.views = nil
		return paneAct{}, false // and switch panes
	case key.Matches(msg, k.Prev), key.Matches(msg, k.Next), key.Matches(msg, k.BigPrev), key.Matches(msg, k.BigNext),
		key.Matches(msg, k.Start), key.Matches(msg, k.End), key.Matches(msg, k.Peak), key.Matches(msg, k.Jump),
		key.Matches(msg, k.Play), key.Matches(msg, k.Follow), key.Matches(msg, k.Device), key.Matches(msg, k.Relative),
		key.Matches(msg, k.Slower), key.Matches(msg, k.Faster), key.Matches(msg, k.WhatIf), key.Matches(msg, k.NextOOM):
		return paneAct{}, false // the cursor moves under the view
	}
	return paneAct{}, true
}

// viewRows is the number of selectable rows of v.
func (x *explainUI) viewRows(v *xview) int {
	switch v.kind {
	case viewHolders:
		if x.diff != nil {
			return len(x.diff)
		}
		return len(x.groups)
	case viewAllocs:
		return len(x.groupAllocs(v.group))
	case viewStack:
		return len(v.frames)
	}
	return 0
}

// viewContent is the innermost open view's fixed head and its rows (none
// for the OOM panel, which does not scroll).
func (x *explainUI) viewContent(c *paneCtx, v *xview) (head, rows []string) {
	switch v.kind {
	case viewHolders:
		return x.holdersLines(c)
	case viewAllocs:
		return x.allocLines(c, v.group)
	case viewStack:
		return x.stackLines(c, v)
	}
	return nil, nil
}

// settleView brings the open view up to date after a message: the
// holders at the cursor, and the selection and scroll kept inside the
// rows the body shows. View only draws what it leaves.
func (x *explainUI) settleView(c *paneCtx) {
	if !x.open() {
		return
	}
	x.refreshHolders(c, false)
	v := x.top()
	if v.kind == viewOOM {
		return
	}
	head, rows := x.viewContent(c, v)
	n := max(1, c.h-headerRows-hintRows-len(head))
	if v.kind == viewStack {
		// a stack scrolls: sel is the first frame shown
		v.sel = clampInt(v.sel, 0, max(0, len(rows)-n))
		v.top = v.sel
		return
	}
	if v.sel < v.top {
		v.top = v.sel
	}
	if v.sel >= v.top+n {
		v.top = v.sel - n + 1
	}
	v.top = clampInt(v.top, 0, max(0, len(rows)-n))
}

// viewLines renders the innermost open view in the body's rows, scrolled
// as settleView left it.
func (x *explainUI) viewLines(c *paneCtx, body int) []string {
	v := x.top()
	if v.kind == viewOOM {
		return pad(x.oomLines(c, v.oom, body), body)
	}
	head, rows := x.viewContent(c, v)
	out := append([]string{}, head...)
	n := max(1, body-len(head))
	for i := v.top; i < len(rows) && i < v.top+n; i++ {
		l := rows[i]
		if v.kind != viewStack && i == v.sel {
			l = c.th.Selected.Render(fit(c.th.G.Selected+" "+l, c.w))
		} else {
			l = "  " + l
		}
		out = append(out, l)
	}
	if len(rows) == 0 {
		out = append(out, "  (none)")
	}
	return pad(out, body)
}

func pad(lines []string, n int) []string {
	for len(lines) < n {
		lines = append(lines, "")
	}
	return lines[:n]
}

func (x *explainUI) holdersLines(c *paneCtx) (head, rows []string) {
	th := c.th
	title := fmt.Sprintf("Holders by %s · %s · %d live allocations, %s · %s", x.by, posText(x.at), len(x.live),
		bytesize.Format(x.active), c.tf.full(c.cursor))
	head = []string{th.Header.Render(fit(title, c.w))}
	w := c.w - 2
	if x.diff != nil {
		head = append(head, th.Dim.Render(fit(fmt.Sprintf("change from mark A (%s, %s) to the cursor · m clears the mark", c.tf.full(x.markT), posText(x.markN)), c.w)),
			th.Dim.Render(fit(fmt.Sprintf("  %10s %10s %10s %9s %6s %6s  %s", "DELTA", "MARK A", "CURSOR", "COUNT", "BORN", "FREED", "GROUP"), w)))
		kf := x.holderKeys()
		for _, g := range x.diff {
			r := fmt.Sprintf("%10s %10s %10s %9s %6d %6d  ", fmtDelta(g.DeltaBytes), bytesize.Format(g.BytesFrom), bytesize.Format(g.BytesTo),
				fmt.Sprintf("%d→%d", g.CountFrom, g.CountTo), g.BornCount, g.FreedCount)
			rows = append(rows, r+kf.fit(g.Key, w-theme.Width(r)))
		}
		return head, rows
	}
	head = append(head, th.Dim.Render(fit("enter: its allocations · v: stack · m: mark A · b: group by · esc: back", c.w)),
		th.Dim.Render(fit(fmt.Sprintf("  %10s %6s %6s %10s %8s  %s", "BYTES", "SHARE", "COUNT", "LARGEST", "OLDEST", "GROUP"), w)))
	kf := x.holderKeys()
	for i := range x.groups {
		g := &x.groups[i]
		oldest := "start"
		if g.OldestIndex >= 0 {
			oldest = fmt.Sprintf("#%d", g.OldestIndex)
		}
		r := fmt.Sprintf("%10s %5.1f%% %6d %10s %8s  ", bytesize.Format(g.Bytes), 100*g.Share, g.Count, bytesize.Format(g.LargestBytes), oldest)
		rows = append(rows, r+kf.fit(g.Key, w-theme.Width(r)))
	}
	return head, rows
}

func (x *explainUI) allocLines(c *paneCtx, group string) (head, rows []string) {
	th := c.th
	al := x.groupAllocs(group)
	t := fmt.Sprintf("%d allocations of ", len(al))
	head = []string{th.Header.Render(fit(t+x.fitKey(group, c.w-theme.Width(t)), c.w)),
		th.Dim.Render(fit("enter or v: stack · esc: back", c.w)),
		th.Dim.Render(fit(fmt.Sprintf("  %10s  %-18s %-9s %s", "BYTES", "ADDRESS", "STATE", "BORN"), c.w-2))}
	for _, a := range al {
		state := "allocated"
		if a.Pending {
			state = "pending"
		}
		born := "before the trace"
		if a.Born >= 0 {
			born = fmt.Sprintf("#%d", a.Born)
			if a.BornTime != 0 && c.base == store.TimeEpochUS {
				born += " · " + c.tf.full(a.BornTime)
			}
		}
		rows = append(rows, fit(fmt.Sprintf("%10s  %-18s %-9s %s", bytesize.Format(a.Size), fmt.Sprintf("0x%x", a.Addr), state, born), c.w-2))
	}
	return head, rows
}

func (x *explainUI) stackLines(c *paneCtx, v *xview) (head, rows []string) {
	th := c.th
	how := "x: unfold"
	if v.unfold {
		how = "x: fold"
	}
	head = []string{th.Header.Render(fit("Stack · innermost first · ↑/↓ pgup/pgdn scroll · "+how+" · esc: back", c.w))}
	for _, t := range v.title {
		head = append(head, fit(t, c.w))
	}
	head = append(head, th.Dim.Render(strings.Repeat(th.G.HBar, c.w)))
	if v.unfold {
		for i, f := range v.frames {
			rows = append(rows, fmt.Sprintf("%2d  %s", i, explain.FormatFrame(f, c.w-2-4)))
		}
	} else {
		// the user frames and the call site, each other run folded
		r := x.grouper(c).Rules()
		keep := -1
		if s, ok := r.Callsite(v.frames); ok {
			keep = s.Index
		}
		for _, l := range r.Fold(v.frames, keep) {
			if l.Folded {
				rows = append(rows, "    "+th.Dim.Render(fit(l.Text()+" (x: unfold)", c.w-2-4)))
			} else {
				rows = append(rows, fmt.Sprintf("%2d  %s", l.Start, explain.FormatFrame(v.frames[l.Start], c.w-2-4)))
			}
		}
	}
	if len(v.frames) == 0 {
		rows = append(rows, "no stack recorded")
	}
	return head, rows
}

// oomIndent puts a line of the OOM panel under its figures' values.
const oomIndent = "                       "

// oomLines is the OOM panel in at most body lines. What does not fit gives
// way in this order: the blank lines between sections, stack frames past
// the first (v shows the whole stack), the panel's own key hint (the bottom
// line has the keys), holders past the second (h shows them all), the
// verdict's sentence past its first line, holders past the first.
func (x *explainUI) oomLines(c *paneCtx, o *oomFacts, body int) []string {
	reason := theme.Wrap(o.reason, max(20, c.w-len(oomIndent)))
	gap, hint, nr, nf, nh := 1, true, len(reason), min(len(explain.StackText(x.grouper(c).Rules(), o.frames, 0)), 4), len(o.top)
	for {
		out := x.oomPanel(c, o, reason, nr, nf, nh, gap, hint)
		switch {
		case len(out) <= body:
			return out
		case gap > 0:
			gap = 0
		case nf > 1:
			nf--
		case hint:
			hint = false
		case nh > 2:
			nh--
		case nr > 1:
			nr--
		case nh > 1:
			nh--
		default:
			return out
		}
	}
}

// oomPanel lays the OOM panel out: the first nr lines of the verdict's
// sentence (marked "…" when cut), nf stack frames, nh holders, gap blank
// lines between sections, the panel's hint or not.
func (x *explainUI) oomPanel(c *paneCtx, o *oomFacts, reason []string, nr, nf, nh, gap int, hint bool) []string {
	th := c.th
	out := []string{th.Header.Render(fit(fmt.Sprintf("Out of memory at entry #%d · %s", o.seq, c.tf.full(o.time)), c.w))}
	row := func(k, v string) { out = append(out, fit(fmt.Sprintf("  %-20s %s", k, v), c.w)) }
	blank := func() {
		for range gap {
			out = append(out, "")
		}
	}
	out = append(out, fit("  verdict              "+th.Warn.Render(o.verdict), c.w))
	for i, l := range reason[:nr] {
		if i == nr-1 && nr < len(reason) {
			l += " …"
		}
		out = append(out, fit(oomIndent+th.Dim.Render(l), c.w))
	}
	row("requested", bytesize.Format(o.requested))
	row("device free", bytesize.Format(o.free))
	row("reserved", bytesize.Format(o.fig.Reserved))
	row("allocated", bytesize.Format(o.fig.Allocated))
	row("cached free", fmt.Sprintf("%s (largest block %s)", bytesize.Format(o.fig.CachedFree), bytesize.Format(o.fig.LargestCachedFree)))
	op := o.op
	if op == "" {
		op = "—"
	}
	row("op", op)
	blank()
	out = append(out, th.Dim.Render(fit("the failing request's stack (v: whole stack)", c.w)))
	for _, l := range explain.StackText(x.grouper(c).Rules(), o.frames, c.w-2)[:nf] {
		out = append(out, "  "+l)
	}
	if len(o.frames) == 0 {
		out = append(out, "  no stack recorded")
	}
	blank()
	out = append(out, th.Dim.Render(fit("top holders (h: all holders here)", c.w)))
	topKeys := make([]string, nh)
	for i, g := range o.top[:nh] {
		topKeys[i] = g.Key
	}
	kf := newKeyFit(topKeys)
	for _, g := range o.top[:nh] {
		r := fmt.Sprintf("  %10s %5.1f%% %6d  ", bytesize.Format(g.Bytes), 100*g.Share, g.Count)
		out = append(out, r+kf.fit(g.Key, c.w-theme.Width(r)))
	}
	if hint {
		h := "w: what-if (other allocator settings) · o: next OOM · esc: back"
		if !c.whatIf {
			h = "o: next OOM · esc: back (what-if needs a snapshot file: npumon whatif / explain)"
		}
		blank()
		out = append(out, th.Dim.Render(fit(h, c.w)))
	}
	return out
}

// viewHint is the hint line while a view is open.
func (x *explainUI) viewHint(c *paneCtx) string {
	switch x.top().kind {
	case viewStack:
		return "↑/↓ scroll · x unfold/fold · esc back · q quits"
	case viewOOM:
		if !c.whatIf {
			return "v stack · h holders · o next OOM · esc back · q quits"
		}
		return "v stack · h holders · o next OOM · w what-if · esc back · q quits"
	}
	return "↑/↓ select · enter open · v stack · b group by · m mark A · ←/→ move · esc back · q quits"
}

// keyFit fits the group keys of one list (the holders, a diff, an OOM's
// top holders) in their column so that each still reads differently from
// the others: keys that differ only at the end ("Block.forward (layers.0)
// (model.py:88)" … "(layers.4)") keep their ends. The zero keyFit fits a
// key alone.
type keyFit struct {
	keys  *explain.Names // the whole keys
	sites *explain.Names // call sites' "path:line\x00name": names that share a location
}

func newKeyFit(keys []string) keyFit {
	var sites []string
	for _, k := range keys {
		if name, loc, ok := splitSite(k); ok {
			sites = append(sites, loc+"\x00"+name)
		}
	}
	return keyFit{keys: explain.NewNames(keys), sites: explain.NewNames(sites)}
}

// fit fits key k in w cells: a call site's "name (path:line)" keeps its
// name, file and line and gives up the path from the left; the name then
// gives way where it is the same as another name at the same location
// (explain.TruncShared), as does any other key.
func (f keyFit) fit(k string, w int) string {
	if theme.Width(k) <= w || w <= 0 {
		return k
	}
	if name, loc, ok := splitSite(k); ok {
		room := w - explain.Width(name) - 3
		if room >= min(explain.Width(loc), 18) {
			return name + " (" + explain.TruncLeft(loc, room) + ")"
		}
		// the name gives way too: the location keeps up to 18 cells, less
		// (down to "…/file.py:line") while the name has under 8
		room = min(explain.Width(loc), 18)
		if w-3-room < 8 {
			base := loc
			if i := strings.LastIndexAny(loc, `/\`); i >= 0 {
				base = "…" + loc[i:]
			}
			room = min(room, max(explain.Width(base), w-3-8))
		}
		if w-3-room >= 4 {
			shared := f.sites.Shared(loc+"\x00"+name) - len([]rune(loc)) - 1
			return explain.TruncShared(name, w-3-room, shared) + " (" + explain.TruncLeft(loc, room) + ")"
		}
	}
	return f.keys.Trunc(k, w)
}

// splitSite splits a call site's key "name (path:line)" (not a stack key,
// whose frames are joined by " < ").
func splitSite(k string) (name, loc string, ok bool) {
	i := strings.LastIndex(k, " (")
	if i <= 0 || !strings.HasSuffix(k, ")") || strings.Contains(k, " < ") {
		return "", "", false
	}
	return k[:i], k[i+2 : len(k)-1], true
}

// fitKey fits a key shown alone (a title) in w cells, as keyFit.fit does
// among the holders the view shows.
func (x *explainUI) fitKey(k string, w int) string { return x.holderKeys().fit(k, w) }

// holderKeys is the keyFit of the holders (or the diff) the view lists.
func (x *explainUI) holderKeys() keyFit {
	var keys []string
	if x.diff != nil {
		for i := range x.diff {
			keys = append(keys, x.diff[i].Key)
		}
	} else {
		for i := range x.groups {
			keys = append(keys, x.groups[i].Key)
		}
	}
	return newKeyFit(keys)
}

// posText names a position (entries applied) as the header does: the index
// of the last entry applied, or the start.
func posText(n int64) string {
	if n <= 0 {
		return "the start"
	}
	return fmt.Sprintf("entry #%d", n-1)
}
