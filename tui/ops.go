package tui

import (
	"fmt"
	"slices"
	"sort"

	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/monitor/store"
)

var opSortNames = []string{"start", "duration", "mem delta", "name"}

func (m *Model) rebuildOpView() { m.updateOpView(0) }

// opLess orders the op table by the chosen column (ties: start order).
func (m *Model) opLess(a, b int) bool {
	x, y := &m.ops[a], &m.ops[b]
	switch m.opSort {
	case 1:
		return x.EndUS-x.StartUS > y.EndUS-y.StartUS
	case 2:
		return x.MemDelta > y.MemDelta
	case 3:
		return x.Name < y.Name
	}
	return false
}

// updateOpView brings the op table up to date after the ops from index
// from on changed (0: everything). In start order only the new ops are
// filtered; sorted by another column, the new ops are sorted and merged in.
func (m *Model) updateOpView(from int) {
	kept := m.opView[:0]
	if from > 0 {
		if m.opSort == 0 {
			// start order: the view is ascending, cut it at from
			k := sort.SearchInts(m.opView, from)
			kept = m.opView[:k]
		} else {
			for _, i := range m.opView {
				if i < from {
					kept = append(kept, i)
				}
			}
		}
	}
	n := len(kept)
	for i := from; i < len(m.ops); i++ {
		if m.flt.matchOp(&m.ops[i]) {
			kept = append(kept, i)
		}
	}
	if m.opSort != 0 && len(kept) > n {
		added := kept[n:]
		sort.SliceStable(added, func(a, b int) bool { return m.opLess(added[a], added[b]) })
		if n > 0 {
			// stable merge: on ties the older (lower-index) op comes first
			merged := make([]int, 0, len(kept))
			i, j := 0, n
			for i < n && j < len(kept) {
				if m.opLess(kept[j], kept[i]) {
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
	m.opView = kept
	m.opSel = clampInt(m.opSel, 0, len(m.opView)-1)
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
	// The first row follows from the selection alone (kept mid-pane), so
	// drawing changes no scroll state; opDrawnTop only lets a click find
	// its row.
	top := clampInt(m.opSel-rows/2, 0, max(0, len(m.opView)-rows))
	m.opDrawnTop = top
	for i := top; i < len(m.opView) && i < top+rows; i++ {
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

// refreshOps brings m.ops (and the step index) up to date and returns the
// lowest index that changed (len(m.ops) when nothing did).
func (m *Model) refreshOps() int {
	from := m.readOps()
	m.steps = m.steps[:sort.SearchInts(m.steps, from)]
	m.opMaxEnd = oprange.MaxEnds(m.ops[from:], m.opMaxEnd[:from])
	for i := from; i < len(m.ops); i++ {
		if m.ops[i].IsStep {
			m.steps = append(m.steps, i)
		}
	}
	return from
}

// readOps brings m.ops up to date and returns the lowest index that
// changed. A live source grows for hours: only what changed since the
// last read (Source.OpsSince) is copied.
func (m *Model) readOps() int {
	src := m.o.Source
	ops, from, ver := src.OpsSince(m.opsVer)
	if from > len(m.ops) { // not the copy the version stands for: start afresh
		ops, from, ver = src.OpsSince(0)
	}
	m.opsVer = ver
	m.ops = append(m.ops[:from], ops...)
	return from
}

// followOp selects the op at the cursor in the op table, so the table
// follows the cursor in live and replay: the op the header names (the
// Source's OpAt: the one attribution, oprange.Innermost); where the header
// names none, the innermost range holding the cursor by the same rule with
// steps included (a ProfilerStep#N between its ops), else the last op that
// started before the cursor. With a filter on, the nearest kept op before.
func (m *Model) followOp() {
	if len(m.opView) == 0 || m.base != store.TimeEpochUS {
		return
	}
	c := m.cursor
	i := -1
	if m.hasOpAt {
		at := sort.Search(len(m.ops), func(i int) bool { return m.ops[i].StartUS >= m.opAt.StartUS })
		for ; at < len(m.ops) && m.ops[at].StartUS == m.opAt.StartUS; at++ {
			if m.ops[at] == m.opAt {
				i = at
				break
			}
		}
	}
	if i < 0 {
		i = oprange.Innermost(rangeTable{m.ops, m.opMaxEnd}, c)
	}
	if i < 0 { // m.ops is in start order: the last op starting at or before c
		i = sort.Search(len(m.ops), func(i int) bool { return m.ops[i].StartUS > c }) - 1
	}
	if i < 0 {
		return
	}
	if m.opSort == 0 {
		if k := sort.SearchInts(m.opView, i+1) - 1; k >= 0 {
			m.opSel = k
		}
		return
	}
	if k := slices.Index(m.opView, i); k >= 0 {
		m.opSel = k
	}
}

// rangeTable is the op table's ops as oprange.Innermost searches them,
// steps included.
type rangeTable struct {
	ops    []store.Op
	maxEnd []int64
}

func (t rangeTable) Len() int           { return len(t.ops) }
func (t rangeTable) Start(i int) int64  { return t.ops[i].StartUS }
func (t rangeTable) End(i int) int64    { return t.ops[i].EndUS }
func (t rangeTable) MaxEnd(i int) int64 { return t.maxEnd[i] }
func (t rangeTable) Skip(int) bool      { return false }
