// Package whatif is the TUI's what-if view: the reserved-bytes curves of
// the recorded run and of its re-simulations under other allocator settings
// (replay/whatif) on one time axis, with the table of figures. It is a
// Bubble Tea sub-model; the screen that opens it routes messages to it and
// closes it on CloseMsg.
package whatif

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
	"github.com/npumon/npumon/tui/chart"
	"github.com/npumon/npumon/tui/theme"
)

// ResultMsg delivers a finished simulation started by Start.
type ResultMsg struct {
	gen    int
	Result *whatif.Result
	Err    error
	times  [][]int64
}

// CloseMsg asks the owner to close the view (esc or w).
type CloseMsg struct{}

// Model is the what-if view.
type Model struct {
	th      *theme.Theme
	w, h    int
	res     *whatif.Result
	times   [][]int64 // per device of res: epoch µs of each entry, nil without times
	dev     int       // index into res.Devices
	sel     int       // selected run (index into Runs), drawn on top
	err     error
	running bool
	gen     int
	cancel  context.CancelFunc
	noHint  bool // the owner shows the keys in its own hint line

	// Keys are the view's bindings (DefaultKeyMap).
	Keys KeyMap

	// XLabel, when set, writes the time axis as the main timeline does:
	// t is an entry's epoch µs, span the axis span in µs.
	XLabel func(t, span int64) string
}

// New returns an empty view.
func New(th *theme.Theme) Model { return Model{th: th, Keys: DefaultKeyMap()} }

// Start runs the simulations of c with run in the background and returns
// the command whose ResultMsg fills the view. A running simulation is
// cancelled.
func (m *Model) Start(ctx context.Context, run whatif.Simulator, c *replay.Capture, opts whatif.Options) tea.Cmd {
	m.Stop()
	ctx, cancel := context.WithCancel(ctx)
	m.cancel, m.running, m.err, m.res = cancel, true, nil, nil
	m.gen++
	gen := m.gen
	return func() tea.Msg {
		res, err := run(ctx, c, opts)
		return ResultMsg{gen: gen, Result: res, Err: err, times: entryTimes(res, c.Snapshot)}
	}
}

// Stop cancels a running simulation.
func (m *Model) Stop() {
	if m.cancel != nil {
		m.cancel()
		m.cancel = nil
	}
	m.running = false
}

// entryTimes builds the per-device time axis (non-decreasing epoch µs);
// nil for a device without times.
func entryTimes(res *whatif.Result, s *snapshot.Snapshot) [][]int64 {
	if res == nil || s == nil {
		return nil
	}
	times := make([][]int64, len(res.Devices))
	for i, d := range res.Devices {
		if !d.HasTimestamps || d.Device >= len(s.DeviceTraces) {
			continue
		}
		tr := s.DeviceTraces[d.Device]
		ts := make([]int64, len(tr))
		var last int64
		for j := range tr {
			last = max(last, tr[j].TimeUS)
			ts[j] = last
		}
		if len(ts) > 0 && ts[0] > 0 {
			times[i] = ts
		}
	}
	return times
}

// Hint is the view's key help, for an owner that draws its own hint line
// (see SetHint).
const Hint = "↑/↓ select run · d next device · esc close"

// SetHint turns the view's own last-row key help on (the default) or off.
func (m *Model) SetHint(on bool) { m.noHint = !on }

// SetSize sets the view's size in cells.
func (m *Model) SetSize(w, h int) { m.w, m.h = w, h }

// Result returns the shown result (nil while running or after an error).
func (m *Model) Result() *whatif.Result { return m.res }

// Err returns the simulation error, if any.
func (m *Model) Err() error { return m.err }

// Running reports whether a simulation is in flight.
func (m *Model) Running() bool { return m.running }

// Update handles results, sizes and the view's keys (Keys): ↑/↓ (k/j)
// select a run, d the next device, esc or w close.
func (m Model) Update(msg tea.Msg) (Model, tea.Cmd) {
	switch msg := msg.(type) {
	case ResultMsg:
		if msg.gen != m.gen {
			return m, nil // a cancelled run
		}
		m.running, m.cancel = false, nil
		m.res, m.err, m.dev, m.sel, m.times = msg.Result, msg.Err, 0, 0, msg.times
	case tea.WindowSizeMsg:
		m.SetSize(msg.Width, msg.Height)
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, m.Keys.Close):
			m.Stop()
			return m, func() tea.Msg { return CloseMsg{} }
		case key.Matches(msg, m.Keys.Up):
			if m.sel > 0 {
				m.sel--
			}
		case key.Matches(msg, m.Keys.Down):
			if d := m.device(); d != nil && m.sel < len(d.Runs)-1 {
				m.sel++
			}
		case key.Matches(msg, m.Keys.Device):
			if m.res != nil && len(m.res.Devices) > 0 {
				m.dev = (m.dev + 1) % len(m.res.Devices)
				m.sel = 0
			}
		}
	}
	return m, nil
}

func (m *Model) device() *whatif.DeviceResult {
	if m.res == nil || m.dev >= len(m.res.Devices) {
		return nil
	}
	return &m.res.Devices[m.dev]
}

// runGlyphs mark the simulated runs' curves; colour repeats them.
var runGlyphs = []rune{'*', '+', 'o', 'x', '#', '%', '@', '&'}

// View renders exactly w×h cells.
func (m *Model) View() string {
	if m.w <= 0 || m.h <= 0 {
		return ""
	}
	th := m.th
	c := theme.NewCanvas(m.w, m.h)
	d := m.device()
	switch {
	case m.err != nil:
		c.Text(0, 0, "what-if failed: "+m.err.Error(), &th.Warn)
	case m.running:
		c.Text(0, 0, "what-if: re-simulating the trace under each configuration"+th.G.Ellipsis, &th.Header)
	case d == nil:
		c.Text(0, 0, "what-if: nothing simulated", &th.Header)
	}
	dot := " · "
	if th.ASCII {
		dot = theme.ToASCII(dot)
	}
	if d != nil && m.err == nil && len(d.Runs) == 0 {
		// Nothing to simulate: the same words as whatif and explain.
		c.Text(0, 0, theme.Fit(fmt.Sprintf("What-if%sdevice %d", dot, d.Device), m.w), &th.TitleFocused)
		m.trustLines(c, d, 2, max(1, m.h-3))
		d = nil
	}
	if d == nil || m.err != nil {
		c.Text(0, m.h-1, "esc close", &th.Hint)
		return c.StringWith(th)
	}
	title := fmt.Sprintf("What-if%sdevice %d%s%s allocator%sdevice memory %s (%s)",
		dot, d.Device, dot, m.res.Flavour, dot, bytesize.Torch(d.DeviceMem), d.DeviceMemSource)
	c.Text(0, 0, theme.Fit(title, m.w), &th.TitleFocused)

	rows := d.Table()
	hintH := 1
	if m.noHint {
		hintH = 0
	}
	tableRows := min(len(rows)+1, max(2, m.h-8-hintH)) // header + runs, keep ≥5 chart rows
	chartTop := 2
	trustH := 1 // a run not reproduced gets a second row for the why
	if !d.Trust.Reproduces {
		trustH = 2
	}
	chartH := m.h - chartTop - tableRows - 1 - trustH - hintH
	m.legend(c, d, 1)
	if chartH >= 4 {
		m.chart(c, d, chartTop, chartH)
	}
	m.table(c, rows, m.h-1-trustH-hintH-tableRows, tableRows)
	c.Text(0, m.h-1-trustH-hintH, theme.Fit(d.FidelityLine(), m.w), &th.Dim)
	m.trustLines(c, d, m.h-trustH-hintH, trustH)
	if !m.noHint {
		hint := Hint
		if th.ASCII {
			hint = theme.ToASCII(hint)
		}
		c.Text(0, m.h-1, theme.Fit(hint, m.w), &th.Hint)
	}
	return c.StringWith(th)
}

// trustLines writes the baseline's standing (whatif.Trust.Text, the words
// of whatif and explain) into up to n rows from y: a warning when the
// simulation does not reproduce the run.
func (m *Model) trustLines(c *theme.Canvas, d *whatif.DeviceResult, y, n int) {
	st := &m.th.Dim
	if !d.Trust.Reproduces {
		st = &m.th.Warn
	}
	for i, line := range theme.Wrap(d.TrustLine(), m.w) {
		if i >= n {
			break
		}
		c.Text(0, y+i, theme.Fit(line, m.w), st)
	}
}

func (m *Model) runStyle(i int) *lipgloss.Style {
	return &m.th.BlockPalette[i%len(m.th.BlockPalette)]
}

// legend writes "░ recorded  ✗ first OOM  * baseline  + conf …" on row y.
func (m *Model) legend(c *theme.Canvas, d *whatif.DeviceResult, y int) {
	th := m.th
	x := c.Text(0, y, string(th.G.Reserved)+" recorded", &th.Reserved)
	if d.Recorded.FirstOOM != nil || slices.ContainsFunc(d.Runs, func(r *whatif.Run) bool { return r.FirstOOM != nil }) {
		x = c.Text(x, y, "  "+string(th.G.OOM)+" first OOM", &th.Warn)
	}
	for i, r := range d.Runs {
		if x >= m.w {
			break
		}
		x = c.Text(x, y, "  ", nil)
		st, text := m.runStyle(i), string(runGlyphs[i%len(runGlyphs)])+" "+r.Name
		if i == m.sel {
			st, text = &th.Selected, "["+text+"]" // marked without colour too
		}
		x = c.Text(x, y, text, st)
	}
}

// xAxis returns the x of a curve point's entry index and the axis range.
func (m *Model) xAxis(d *whatif.DeviceResult) (xOf func(int) float64, x1 float64, label func(float64) string) {
	n := d.Input.Entries
	if m.dev < len(m.times) && m.times[m.dev] != nil {
		ts := m.times[m.dev]
		t0 := ts[0]
		xOf = func(i int) float64 {
			if i < 0 {
				return 0
			}
			return float64(ts[min(i, len(ts)-1)]-t0) / 1e6
		}
		x1 := max(xOf(n-1), 1e-6)
		label = secondsLabel(x1)
		if m.XLabel != nil {
			label = func(x float64) string { return m.XLabel(t0+int64(math.Round(x*1e6)), int64(x1*1e6)) }
		}
		return xOf, x1, label
	}
	xOf = func(i int) float64 { return float64(i + 1) }
	return xOf, float64(max(n, 1)), func(v float64) string { return fmt.Sprintf("#%.0f", v) }
}

// sample returns per column the maximum of the step curve over the column.
func sample(pts []whatif.Point, xOf func(int) float64, x1 float64, cols int) []float64 {
	out := make([]float64, cols)
	span := x1 / float64(cols)
	k := 0
	var cur float64
	for col := range cols {
		start, end := float64(col)*span, float64(col+1)*span
		for k < len(pts) && xOf(pts[k].Index) <= start { // value at the column's start
			cur = float64(pts[k].Bytes)
			k++
		}
		hi := cur
		for k < len(pts) && (xOf(pts[k].Index) < end || col == cols-1) {
			cur = float64(pts[k].Bytes)
			hi = max(hi, cur)
			k++
		}
		out[col] = hi
	}
	return out
}

// chart draws the curves with ntcharts into rows [top, top+h).
func (m *Model) chart(c *theme.Canvas, d *whatif.DeviceResult, top, h int) {
	th := m.th
	const yw = 6 // y label width
	if m.w < yw+6 {
		return
	}
	xOf, x1, xLabel := m.xAxis(d)
	curves := [][]whatif.Point{d.Recorded.Reserved}
	for _, r := range d.Runs {
		curves = append(curves, r.Reserved)
	}
	var ymax float64 = 1
	for _, c := range curves {
		for _, p := range c {
			ymax = math.Max(ymax, float64(p.Bytes))
		}
	}
	limit := float64(d.DeviceMem)
	showLimit := limit > 0 && limit <= 1.5*ymax
	if showLimit {
		ymax = math.Max(ymax, limit)
	}
	yTop := chart.NiceCeil(ymax * 1.05)
	lc := linechart.New(m.w, h, 0, x1, 0, yTop,
		linechart.WithXYSteps(max(2, (m.w-yw)/12), max(1, (h-2)/3)),
		linechart.WithXLabelFormatter(func(_ int, v float64) string { return xLabel(v) }),
		linechart.WithYLabelFormatter(func(_ int, v float64) string { return fmt.Sprintf("%*s", yw, bytesize.Short(v)) }),
	)
	lc.DrawXYAxisAndLabel()
	cols := max(1, lc.GraphWidth()) // one sample per graph cell
	series := make([][]float64, len(curves))
	for i, c := range curves {
		series[i] = sample(c, xOf, x1, cols)
	}
	xAt := func(col int) float64 { return (float64(col) + 0.5) * x1 / float64(cols) }
	if showLimit {
		lc.DrawRuneLine(canvas.Float64Point{X: 0, Y: limit}, canvas.Float64Point{X: x1, Y: limit}, '-')
	}
	for col, v := range series[0] { // the recording as an area
		if v > 0 {
			lc.DrawRuneLine(canvas.Float64Point{X: xAt(col), Y: 0}, canvas.Float64Point{X: xAt(col), Y: v}, th.G.Reserved)
		}
	}
	order := make([]int, 0, len(d.Runs))
	for i := range d.Runs {
		if i != m.sel {
			order = append(order, i)
		}
	}
	order = append(order, m.sel) // the selected run on top
	for _, i := range order {
		s := series[i+1]
		g := runGlyphs[i%len(runGlyphs)]
		for col := range s {
			p := canvas.Float64Point{X: xAt(col), Y: s[col]}
			q := p
			if col+1 < len(s) {
				q = canvas.Float64Point{X: xAt(col + 1), Y: s[col+1]}
			}
			lc.DrawRuneLine(p, q, g)
		}
	}
	// First OOMs (recorded and simulated), each on its own curve.
	ooms := []*whatif.OOM{d.Recorded.FirstOOM}
	for _, r := range d.Runs {
		ooms = append(ooms, r.FirstOOM)
	}
	for i, o := range ooms {
		if o != nil {
			lc.DrawRune(canvas.Float64Point{X: xOf(o.Index), Y: valueAt(curves[i], o.Index)}, th.G.OOM)
		}
	}
	styles := map[rune]*lipgloss.Style{th.G.Reserved: &th.Reserved, '-': &th.Warn, th.G.OOM: &th.Warn}
	for i := range d.Runs {
		styles[runGlyphs[i%len(runGlyphs)]] = m.runStyle(i)
	}
	chart.CopyInto(c, top, &lc, th, styles)
}

// valueAt is the step curve's value right after entry index i.
func valueAt(pts []whatif.Point, i int) float64 {
	k := sort.Search(len(pts), func(k int) bool { return pts[k].Index > i })
	if k == 0 {
		return 0
	}
	return float64(pts[k-1].Bytes)
}

// table writes the header and up to n−1 rows, dropping columns from the
// right of the priority list until they fit.
func (m *Model) table(c *theme.Canvas, rows [][]string, top, n int) {
	th := m.th
	// Priority order of whatif.Columns: run, peak reserved, OOM, cached free at peak,
	// segments, peak allocated, retries.
	prio := []int{0, 1, 6, 4, 3, 2, 5}
	widths := make([]int, len(whatif.Columns))
	for j, h := range whatif.Columns {
		widths[j] = theme.Width(h)
		for _, r := range rows {
			widths[j] = max(widths[j], theme.Width(r[j]))
		}
	}
	nameW := widths[0]
	widths[0] = min(nameW, 14) // the name takes what the figures leave
	var keep []int
	total := 2 // the mark column
	for _, j := range prio {
		if total+widths[j]+2 > m.w && len(keep) > 1 {
			break
		}
		keep = append(keep, j)
		total += widths[j] + 2
	}
	widths[0] = min(nameW, widths[0]+max(0, m.w-total))
	cols := slices.Sorted(slices.Values(keep)) // kept columns in their natural order
	// A mark column shows the selected run without colour (NO_COLOR); a
	// name cut short ends in an ellipsis, so max_split_size_mb:128 never
	// reads as max_split_size_mb:1.
	line := func(mark string, cells []string) string {
		var b strings.Builder
		b.WriteString(mark)
		for _, j := range cols {
			cell := cells[j]
			if th.ASCII && cell == "—" {
				cell = "-"
			}
			b.WriteString(th.Fit(cell, widths[j]))
			b.WriteString("  ")
		}
		return th.Fit(b.String(), m.w)
	}
	c.Text(0, top, line("  ", whatif.Columns), &th.Header)
	for i := 0; i < n-1 && i < len(rows); i++ {
		st, mark := (*lipgloss.Style)(nil), "  "
		if i == 0 {
			st = &th.Reserved
		} else if i-1 == m.sel {
			st, mark = &th.Selected, th.G.Selected+" "
		}
		c.Text(0, top+1+i, line(mark, rows[i]), st)
	}
}

// secondsLabel formats axis seconds in the unit the span calls for.
func secondsLabel(span float64) func(float64) string {
	switch {
	case span < 1:
		return func(v float64) string { return fmt.Sprintf("%.0fms", v*1e3) }
	case span < 600:
		return func(v float64) string { return fmt.Sprintf("%.1fs", v) }
	}
	return func(v float64) string { return fmt.Sprintf("%dm%02ds", int(v)/60, int(v)%60) }
}
