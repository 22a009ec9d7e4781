package chart

import (
	"github.com/NimbleMarkets/ntcharts/canvas"
	"github.com/NimbleMarkets/ntcharts/linechart"
	"github.com/charmbracelet/lipgloss"

	"github.com/npumon/npumon/tui/theme"
)

// CopyInto copies lc's drawn cells into out from row top: axes and labels
// dimmed (in ASCII when th.ASCII), graph cells in the style styles gives
// their rune (dimmed when it gives none). ntcharts renders one lipgloss
// call per cell, too slow for a 200-column screen at 10 Hz; out renders
// runs of equal style.
func CopyInto(out *theme.Canvas, top int, lc *linechart.Model, th *theme.Theme, styles map[rune]*lipgloss.Style) {
	origin := lc.Origin()
	for y := range lc.Canvas.Height() {
		for x := range lc.Canvas.Width() {
			r := lc.Canvas.Cell(canvas.Point{X: x, Y: y}).Rune
			if r == 0 {
				continue
			}
			st := &th.Dim
			if x > origin.X && y < origin.Y {
				if s, ok := styles[r]; ok {
					st = s
				}
			} else {
				r = AxisRune(r, th.ASCII)
			}
			out.Set(x, top+y, r, st)
		}
	}
}
