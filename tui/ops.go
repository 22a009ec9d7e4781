package tui

import (
	"fmt"
	"slices"
	"sort"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/monitor/store"
)

var opSortNames = []string{"start", "duration", "mem delta", "name"}

// opsPane is the profiler's ops (pane 4). It owns the op table: the
// Source's ops (read incrementally, Source.OpsSince), the step index, the
// filtered and sorted view, the selection and the highlight. ↑/↓ and the
// page keys select an op, enter highlights it and moves the cursor to its
// start, s sorts. The table follows the cursor (follow).
type opsPane struct {
	size
	ops      []store.Op    // all ops, start order
	ver      uint64        // the Source's op version ops holds (Source.OpsSince)
	steps    []int         // indices of the step ops (IsStep) in ops
	maxEnd   []int64       // prefix-max ends of ops (oprange.Table)
	idx      oprange.Index // the cursor's innermost op over ops (steps included)
	shown    []int         // indices into ops, filtered and sorted: the table's rows
	sel      int           // the selected row of shown
	sort     int           // index into opSortNames
	drawnTop int           // the first row as last drawn (for clicks)
	hl       bool          // the selected op is highlighted on the timeline
}

func (p *opsPane) update(c *paneCtx, msg tea.KeyMsg) (paneAct, bool) {
	k := c.keys
	if d, ok := listStep(k, msg, page(p.h)); ok {
		p.move(d)
		return paneAct{}, true
	}
	switch {
	case key.Matches(msg, k.Enter):
		if p.sel < 0 || p.sel >= len(p.shown) {
			return paneAct{}, true
		}
		p.hl = true
		return paneAct{kind: actGoToOp, op: p.ops[p.shown[p.sel]]}, true
	case key.Matches(msg, k.Sort):
		p.sort = (p.sort + 1) % len(opSortNames)
		p.updateView(c.flt, 0)
		return paneAct{}, true
	}
	return paneAct{}, false
}

func (p *opsPane) view(c *paneCtx) []string { return p.lines(c, p.w, p.h) }
func (p *opsPane) info(*paneCtx) string     { return "sort: " + opSortNames[p.sort] + " (s)" }
func (p *opsPane) keyMap(k *keyMap) []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.Enter, k.Sort}
}

// count is how many ops the Source has.
func (p *opsPane) count() int { return len(p.ops) }

// bounds is the earliest start and latest end of the ops (a source of ops
// only has no other time range); maxInt64, minInt64 without ops.
func (p *opsPane) bounds() (first, last int64) {
	first, last = maxInt64, minInt64
	for i := range p.ops {
		first, last = min(first, p.ops[i].StartUS), max(last, p.ops[i].EndUS)
	}
	return first, last
}

// stepStarts are the start times of the step ops in [w0, w1), in order.
func (p *opsPane) stepStarts(w0, w1 int64) []int64 {
	var ts []int64
	// steps is in start order: visit only the window's step ops
	i := sort.Search(len(p.steps), func(i int) bool { return p.ops[p.steps[i]].StartUS >= w0 })
	for ; i < len(p.steps) && p.ops[p.steps[i]].StartUS < w1; i++ {
		ts = append(ts, p.ops[p.steps[i]].StartUS)
	}
	return ts
}

// move moves the selection d rows, within the table.
func (p *opsPane) move(d int) { p.sel = clampInt(p.sel+d, 0, len(p.shown)-1) }

// selected is the selected row; selectRow selects row i (clamped).
func (p *opsPane) selected() int   { return p.sel }
func (p *opsPane) selectRow(i int) { p.sel = clampInt(i, 0, len(p.shown)-1) }

// rowAt is the row drawn y lines under the column header (for clicks).
func (p *opsPane) rowAt(y int) (int, bool) {
	i := p.drawnTop + y
	return i, y >= 0 && i < len(p.shown)
}

// unhighlight drops the op highlight; false: there was none.
func (p *opsPane) unhighlight() bool {
	was := p.hl
	p.hl = false
	return was
}

// opLess orders the op table by the chosen column (ties: start order).
func (p *opsPane) opLess(a, b int) bool {
	x, y := &p.ops[a], &p.ops[b]
	switch p.sort {
	case 1:
		return x.EndUS-x.StartUS > y.EndUS-y.StartUS
	case 2:
		return x.MemDelta > y.MemDelta
	case 3:
		return x.Name < y.Name
	}
	return false
}

// updateView brings the op table up to date after the ops from index
// from on changed (0: everything), kept by flt. In start order only the
// new ops are filtered; sorted by another column, the new ops are sorted
// and merged in.
func (p *opsPane) updateView(flt *filter, from int) {
	kept := p.shown[:0]
	if from > 0 {
		if p.sort == 0 {
			// start order: the view is ascending, cut it at from
			k := sort.SearchInts(p.shown, from)
			kept = p.shown[:k]
		} else {
			for _, i := range p.shown {
				if i < from {
					kept = append(kept, i)
				}
			}
		}
	}
	n := len(kept)
	for i := from; i < len(p.ops); i++ {
		if flt.matchOp(&p.ops[i]) {
			kept = append(kept, i)
		}
	}
	if p.sort != 0 && len(kept) > n {
		added := kept[n:]
		sort.SliceStable(added, func(a, b int) bool { return p.opLess(added[a], added[b]) })
		if n > 0 {
			// stable merge: on ties the older (lower-index) op comes first
			merged := make([]int, 0, len(kept))
			i, j := 0, n
			for i < n && j < len(kept) {
				if p.opLess(kept[j], kept[i]) {
					merged = append(merged, kept[j])
					j++
				} else {
					merged = append(merged, kept[i])
					i++
				}
			}
			merged = append(append(merged, kept[i:n]...), kept[j:]...)
			kept = merged
		}
	}
	p.shown = kept
	p.sel = clampInt(p.sel, 0, len(p.shown)-1)
}

// lines is the op table.
func (p *opsPane) lines(c *paneCtx, w, h int) []string {
	th := c.th
	tf := c.tf
	head := fmt.Sprintf("  %-12s %10s %10s %8s  %s", "start", "duration", "mem Δ", "thread", "name")
	lines := []string{th.Dim.Render(head)}
	rows := h - 1
	if rows <= 0 {
		return lines[:max(0, h)]
	}
	if len(p.shown) == 0 {
		msg := "no profiler ops in this source"
		if len(p.ops) > 0 {
			msg = "no ops match the filter"
		}
		return append(lines, th.Dim.Render(msg))
	}
	// The first row follows from the selection alone (kept mid-pane), so
	// drawing changes no scroll state; drawnTop only lets a click find
	// its row.
	top := clampInt(p.sel-rows/2, 0, max(0, len(p.shown)-rows))
	p.drawnTop = top
	for i := top; i < len(p.shown) && i < top+rows; i++ {
		o := &p.ops[p.shown[i]]
		mark := "  "
		if i == p.sel {
			mark = th.G.Selected + " "
		}
		at := " "
		if c.cursor >= o.StartUS && c.cursor < o.EndUS {
			at = "*"
		}
		l := fmt.Sprintf("%s%-12s %10s %10s %8d %s%s", mark, tf.clock(o.StartUS), fmtDurUS(o.EndUS-o.StartUS), fmtDelta(o.MemDelta), o.Thread, at, o.Name)
		if i == p.sel {
			l = th.Selected.Render(fit(l, w))
		}
		lines = append(lines, l)
	}
	return lines
}

// refresh brings the ops, the step index and the table up to date with
// the Source.
func (p *opsPane) refresh(c *paneCtx) {
	from := p.readOps(c.src)
	p.steps = p.steps[:sort.SearchInts(p.steps, from)]
	p.maxEnd = oprange.MaxEnds(p.ops[from:], p.maxEnd[:from])
	p.idx.Update(p.table(), from)
	for i := from; i < len(p.ops); i++ {
		if p.ops[i].IsStep {
			p.steps = append(p.steps, i)
		}
	}
	p.updateView(c.flt, from)
}

// table is the ops as the cursor's fallback searches them: steps too.
func (p *opsPane) table() oprange.Sorted {
	return oprange.Sorted{Ops: p.ops, Ends: p.maxEnd, WithSteps: true}
}

// readOps brings p.ops up to date and returns the lowest index that
// changed. A live source grows for hours: only what changed since the
// last read (Source.OpsSince) is copied.
func (p *opsPane) readOps(src Source) int {
	ops, from, ver := src.OpsSince(p.ver)
	if from > len(p.ops) { // not the copy the version stands for: start afresh
		ops, from, ver = src.OpsSince(0)
	}
	p.ver = ver
	p.ops = append(p.ops[:from], ops...)
	return from
}

// follow selects the op at the cursor, so the table follows the cursor in
// live and replay: the op the header names (at, when ok: the Source's
// OpAt, the one attribution, oprange.Innermost); where the header names
// none, the innermost range holding the cursor by the same rule with steps
// included (a ProfilerStep#N between its ops), else the last op that
// started before the cursor. With a filter on, the nearest kept op before.
func (p *opsPane) follow(c *paneCtx, at store.Op, ok bool) {
	if len(p.shown) == 0 || c.base != store.TimeEpochUS {
		return
	}
	cur := c.cursor
	i := -1
	if ok {
		k := sort.Search(len(p.ops), func(i int) bool { return p.ops[i].StartUS >= at.StartUS })
		for ; k < len(p.ops) && p.ops[k].StartUS == at.StartUS; k++ {
			if p.ops[k] == at {
				i = k
				break
			}
		}
	}
	if i < 0 {
		i = p.idx.Innermost(p.table(), cur)
	}
	if i < 0 { // p.ops is in start order: the last op starting at or before cur
		i = sort.Search(len(p.ops), func(i int) bool { return p.ops[i].StartUS > cur }) - 1
	}
	if i < 0 {
		return
	}
	if p.sort == 0 {
		if k := sort.SearchInts(p.shown, i+1) - 1; k >= 0 {
			p.sel = k
		}
		return
	}
	if k := slices.Index(p.shown, i); k >= 0 {
		p.sel = k
	}
}
