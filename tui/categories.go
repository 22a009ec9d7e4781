package tui

import (
	"strings"

	"github.com/npumon/npumon/replay/category"
	"github.com/npumon/npumon/tui/timeline"
)

// catBands are the chart's bands, bottom first: what lives longest at the
// bottom. Each has a letter, so the bands read without colour.
var catBands = []struct {
	c category.Category
	r rune
}{
	{category.Parameter, 'P'}, {category.OptimizerState, 'O'}, {category.Gradient, 'G'},
	{category.Activation, 'A'}, {category.Temporary, 'T'}, {category.Workspace, 'W'}, {category.Unknown, 'U'},
}

// toggleCategoryChart switches the timeline between the reserved, active
// and allocated areas and the live bytes stacked by memory category.
func (m *Model) toggleCategoryChart() {
	if m.d.dev < 0 {
		m.sl.err = "the category chart needs a device trace"
		return
	}
	m.p.tl.catChart = !m.p.tl.catChart
	if m.p.tl.catChart {
		var legend []string
		for _, b := range catBands {
			legend = append(legend, string(b.r)+" "+b.c.String())
		}
		m.sl.err = "timeline by category: " + strings.Join(legend, " ")
	} else {
		m.sl.err = "timeline: reserved, active and allocated bytes"
	}
	m.refreshWindow()
}

// setCategoryStack gives the timeline its category bands (or none) for
// the window's cols columns.
func (m *Model) setCategoryStack(cols int) {
	if !m.p.tl.catChart || m.d.dev < 0 {
		m.p.tl.tl.SetStack(nil, nil)
		return
	}
	th := m.th
	styles := map[category.Category]timeline.Layer{
		category.Parameter: {Style: &th.Reserved}, category.OptimizerState: {Style: &th.Marker},
		category.Gradient: {Style: &th.AllocArea}, category.Activation: {Style: &th.Active},
		category.Temporary: {Style: &th.Dim}, category.Workspace: {Style: &th.HighlightCol},
		category.Unknown: {Style: &th.Dim},
	}
	layers := make([]timeline.Layer, len(catBands))
	for k, b := range catBands {
		layers[k] = timeline.Layer{Rune: b.r, Style: styles[b.c].Style}
	}
	series := m.o.Source.CategorySeries(m.d.dev, m.p.tl.win0, m.p.tl.win1, cols)
	stack := make([][]int64, len(series))
	for i := range series {
		stack[i] = make([]int64, len(catBands))
		for k, b := range catBands {
			stack[i][k] = series[i][b.c]
		}
	}
	m.p.tl.tl.SetStack(stack, layers)
}
