// Package timeline draws the memory timeline pane: allocated, active and
// reserved bytes over a time window (ntcharts linechart with a float time
// axis), a marker strip with steps, OOMs, the highlighted op and the cursor.
package timeline

import (
	"fmt"
	"slices"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/lipgloss"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/chart"
	"github.com/npumon/npumon/tui/theme"
)

// MarkerKind says what a marker on the strip above the chart means.
type MarkerKind uint8

const (
	MarkStep MarkerKind = iota
	MarkOOM
	MarkRestart // a live producer restarted (or resent its state): history before it is its own
)

// Marker is a point in time drawn on the marker strip.
type Marker struct {
	T    int64
	Kind MarkerKind
}

// yLabelWidth is the fixed width of the Y axis labels, so the number of
// graph columns depends only on the pane width.
const yLabelWidth = 5

// Model is the timeline pane. It is a value; setters return nothing and the
// root model owns it.
type Model struct {
	th     *theme.Theme
	w, h   int
	series store.Series
	// XLabel formats an axis value: x is (t − Origin) / Unit.
	XLabel func(x float64) string
	Origin int64
	Unit   float64 // cursor units per axis unit (1e6 for epoch µs → seconds)

	markers   []Marker
	cursor    int64
	hl0, hl1  int64
	hasHL     bool
	base      *theme.Canvas // chart without cursor/markers, rebuilt on data change
	baseDirty bool
	chart     *linechart.Model // the last ntcharts chart drawn (for benchmarks)

	stack  [][]int64 // per column, the stacked layers' bytes (bottom first); nil: the three areas
	layers []Layer
}

// Layer is one band of a stacked chart: its glyph and style.
type Layer struct {
	Rune  rune
	Style *lipgloss.Style
}

// SetStack draws the chart as stacked bands instead of the reserved,
// active and allocated areas: cols[c][k] is layer k's bytes in column c
// (bottom first). nil goes back to the areas.
func (m *Model) SetStack(cols [][]int64, layers []Layer) {
	m.stack, m.layers = cols, layers
	m.baseDirty = true
}

// DebugChart returns the ntcharts model behind the last drawn chart, to
// compare its own rendering with the pane's.
func (m *Model) DebugChart() *linechart.Model { return m.chart }

// New returns an empty timeline.
func New(th *theme.Theme) Model {
	return Model{th: th, Unit: 1, XLabel: func(x float64) string { return fmt.Sprintf("%.0f", x) }, baseDirty: true}
}

// SetSize sets the pane's inner size (columns × rows, marker strip included).
func (m *Model) SetSize(w, h int) {
	if w != m.w || h != m.h {
		m.w, m.h = w, h
		m.baseDirty = true
	}
}

// Columns is the number of chart columns: the Series the pane wants.
func (m *Model) Columns() int {
	c := m.w - yLabelWidth - 1
	if c < 1 {
		return 1
	}
	return c
}

// SetData replaces the drawn series and markers.
func (m *Model) SetData(s store.Series, markers []Marker) {
	m.series = s
	m.markers = markers
	m.baseDirty = true
}

// SetCursor moves the cursor column.
func (m *Model) SetCursor(t int64) { m.cursor = t }

// SetHighlight marks [t0, t1] (an op's interval); ok=false clears it.
func (m *Model) SetHighlight(t0, t1 int64, ok bool) { m.hl0, m.hl1, m.hasHL = t0, t1, ok }

// Invalidate forces the chart to be redrawn (e.g. after a label change).
func (m *Model) Invalidate() { m.baseDirty = true }

// ColumnOf returns the chart column holding t, or -1 outside the window.
func (m *Model) ColumnOf(t int64) int {
	s := m.series
	if s.Columns <= 0 || t < s.T0 || t >= s.T1 {
		if s.Columns > 0 && t == s.T1-1 {
			return s.Columns - 1
		}
		return -1
	}
	return int((float64(t-s.T0) / float64(s.T1-s.T0)) * float64(s.Columns))
}

// View renders the pane: marker strip plus chart, exactly w×h.
func (m *Model) View() string {
	if m.w <= 0 || m.h <= 0 {
		return ""
	}
	if m.baseDirty || m.base == nil {
		m.base = m.drawBase()
		m.baseDirty = false
	}
	c := m.base.Clone()
	th := m.th
	x0 := yLabelWidth + 1
	var steps []int
	for _, mk := range m.markers {
		col := m.ColumnOf(mk.T)
		if col < 0 {
			continue
		}
		switch mk.Kind {
		case MarkOOM:
			c.Set(x0+col, 0, th.G.OOM, &th.Warn)
		case MarkRestart:
			if c.At(x0+col, 0) == ' ' { // an OOM in the same column wins
				c.Set(x0+col, 0, th.G.Restart, &th.Warn)
			}
		case MarkStep:
			steps = append(steps, col)
		}
	}
	// Step marks are thinned so two never touch: many steps in a narrow
	// window would otherwise draw a solid comb.
	slices.Sort(steps)
	last := -2
	for _, col := range steps {
		if col-last < 2 || c.At(x0+col, 0) != ' ' {
			continue
		}
		c.Set(x0+col, 0, th.G.Step, &th.Marker)
		last = col
	}
	if m.hasHL {
		a, b := m.clampCol(m.hl0), m.clampCol(m.hl1)
		for x := a; x <= b && a >= 0; x++ {
			if c.At(x0+x, 0) == ' ' {
				c.Set(x0+x, 0, th.G.Highlight, &th.HighlightCol)
			}
		}
	}
	if col := m.ColumnOf(m.cursor); col >= 0 {
		arrow := '▼'
		if th.ASCII {
			arrow = 'v'
		}
		c.Set(x0+col, 0, arrow, &th.CursorCol)
		for y := 1; y < m.h-2; y++ {
			if c.At(x0+col, y) == ' ' {
				c.Set(x0+col, y, th.G.Cursor, &th.CursorCol)
			}
		}
	}
	return c.StringWith(th)
}

// clampCol maps t to a column, clamping to the window; -1 if entirely outside.
func (m *Model) clampCol(t int64) int {
	s := m.series
	if s.Columns <= 0 {
		return -1
	}
	if t < s.T0 {
		return 0
	}
	if t >= s.T1 {
		return s.Columns - 1
	}
	return m.ColumnOf(t)
}

// drawBase draws axes, labels and the three areas with ntcharts, then copies
// the cells into a theme canvas below the marker strip.
func (m *Model) drawBase() *theme.Canvas {
	th := m.th
	out := theme.NewCanvas(m.w, m.h)
	ch := m.h - 1 // rows below the marker strip
	s := m.series
	if ch < 3 || m.w < yLabelWidth+3 || s.Columns <= 0 || s.T1 <= s.T0 {
		return out
	}
	var ymax int64 = 1
	for i := 0; i < s.Columns && i < len(s.Reserved); i++ {
		ymax = max(ymax, s.Reserved[i].Max, s.Active[i].Max, s.Allocated[i].Max)
	}
	for _, col := range m.stack {
		var sum int64
		for _, v := range col {
			sum += max(v, 0)
		}
		ymax = max(ymax, sum)
	}
	yTop := chart.NiceCeil(float64(ymax))
	span := float64(s.T1-s.T0) / float64(s.Columns) // cursor units per column
	x0 := float64(s.T0-m.Origin) / m.Unit
	cols := s.Columns
	xLast := x0 + float64(cols-1)*span/m.Unit
	if cols == 1 {
		xLast = x0 + span/m.Unit
	}
	ystep := max(1, (ch-2)/3)
	lc := linechart.New(m.w, ch, x0, xLast, 0, yTop,
		linechart.WithXYSteps(12, ystep),
		linechart.WithXLabelFormatter(func(_ int, v float64) string { return m.XLabel(v) }),
		linechart.WithYLabelFormatter(func(_ int, v float64) string { return fmt.Sprintf("%*s", yLabelWidth, bytesize.Short(v)) }),
	)
	lc.DrawXYAxisAndLabel()
	if m.stack != nil {
		styles := map[rune]*lipgloss.Style{}
		for _, l := range m.layers {
			styles[l.Rune] = l.Style
		}
		// top layer first: each band is drawn from 0 to its cumulative top,
		// and the bands below overdraw their part
		for k := len(m.layers) - 1; k >= 0; k-- {
			for i := 0; i < cols && i < len(m.stack); i++ {
				var top int64
				for j := 0; j <= k && j < len(m.stack[i]); j++ {
					top += max(m.stack[i][j], 0)
				}
				if k < len(m.stack[i]) && m.stack[i][k] <= 0 {
					continue
				}
				x := x0 + float64(i)*span/m.Unit
				if cols == 1 {
					x = x0
				}
				lc.DrawRuneLine(canvas.Float64Point{X: x, Y: 0}, canvas.Float64Point{X: x, Y: float64(top)}, m.layers[k].Rune)
			}
		}
		m.chart = &lc
		chart.CopyInto(out, 1, &lc, th, styles)
		return out
	}
	for _, layer := range []struct {
		vals []store.MinMax
		r    rune
	}{{s.Reserved, th.G.Reserved}, {s.Active, th.G.Active}, {s.Allocated, th.G.AllocArea}} {
		for i := 0; i < cols && i < len(layer.vals); i++ {
			v := float64(layer.vals[i].Max)
			if v <= 0 {
				continue
			}
			x := x0 + float64(i)*span/m.Unit
			if cols == 1 {
				x = x0
			}
			lc.DrawRuneLine(canvas.Float64Point{X: x, Y: 0}, canvas.Float64Point{X: x, Y: v}, layer.r)
		}
	}
	m.chart = &lc
	chart.CopyInto(out, 1, &lc, th, map[rune]*lipgloss.Style{th.G.Reserved: &th.Reserved, th.G.Active: &th.Active, th.G.AllocArea: &th.AllocArea})
	return out
}

// TimeAt returns the time under pane column x (0 = the pane's left edge),
// the middle of the chart column there; false left of the chart or before
// any data.
func (m *Model) TimeAt(x int) (int64, bool) {
	s := m.series
	col := x - (yLabelWidth + 1)
	if s.Columns <= 0 || s.T1 <= s.T0 || col < 0 || col >= s.Columns {
		return 0, false
	}
	span := float64(s.T1-s.T0) / float64(s.Columns)
	return s.T0 + int64((float64(col)+0.5)*span), true
}
