package tui

import (
	"fmt"
	"slices"
	"sort"

	"github.com/npumon/npumon/monitor"
)

var opSortNames = []string{"start", "duration", "mem delta", "name"}

func (m *Model) rebuildOpView() {
	m.opView = m.opView[:0]
	for i := range m.ops {
		if m.flt.matchOp(&m.ops[i]) {
			m.opView = append(m.opView, i)
		}
	}
	ops := m.ops
	switch m.opSort {
	case 1:
		sort.SliceStable(m.opView, func(a, b int) bool {
			return ops[m.opView[a]].EndUS-ops[m.opView[a]].StartUS > ops[m.opView[b]].EndUS-ops[m.opView[b]].StartUS
		})
	case 2:
		sort.SliceStable(m.opView, func(a, b int) bool { return ops[m.opView[a]].MemDelta > ops[m.opView[b]].MemDelta })
	case 3:
		sort.SliceStable(m.opView, func(a, b int) bool { return ops[m.opView[a]].Name < ops[m.opView[b]].Name })
	}
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

// opsMargin is how far out of start order live ops may arrive (µs): the
// live refresh re-reads the ops that start within it of the newest one.
const opsMargin = 10_000_000

// refreshOps re-reads the ops. A live source grows for hours, so only the
// tail is fetched again; a replay reads them once.
func (m *Model) refreshOps() {
	src := m.o.Source
	if !m.o.Live || len(m.ops) == 0 {
		m.ops = src.Ops(minInt64, maxInt64)
		return
	}
	t0 := m.ops[len(m.ops)-1].StartUS - opsMargin // m.ops is in start order
	k := sort.Search(len(m.ops), func(i int) bool { return m.ops[i].StartUS >= t0 })
	kept := m.ops[:k:k] // appending must not overwrite what opView indexes
	for _, o := range src.Ops(t0, maxInt64) {
		if o.StartUS >= t0 {
			kept = append(kept, o)
		}
	}
	m.ops = kept
}

// followOp selects the op at the cursor in the op table, so the table
// follows the cursor in live and replay: the innermost op whose interval
// holds the cursor (the latest to start; ends inclusive), or else the last
// op that started before it. With a filter on, the nearest kept op before.
func (m *Model) followOp() {
	if len(m.opView) == 0 || m.base != monitor.TimeEpochUS {
		return
	}
	c := m.cursor
	// m.ops is in start order: the last op starting at or before c.
	last := sort.Search(len(m.ops), func(i int) bool { return m.ops[i].StartUS > c }) - 1
	if last < 0 {
		return
	}
	i := last
	for j := last; j >= 0 && j > last-4096; j-- {
		if m.ops[j].EndUS >= c {
			i = j
			break
		}
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
