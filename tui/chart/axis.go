// Package chart holds the helpers shared by the panes that draw ntcharts
// line charts (the timeline and the what-if view): axis labels and the copy
// of a drawn chart into a theme canvas.
package chart

import (
	"math"
)

// AxisRune maps a box-drawing axis rune to ASCII when ascii is set.
func AxisRune(r rune, ascii bool) rune {
	if !ascii {
		return r
	}
	switch r {
	case '│', '┤', '├':
		return '|'
	case '─', '┬', '┴':
		return '-'
	case '└', '┼', '┌', '┐', '┘':
		return '+'
	}
	return r
}

// NiceCeil rounds v up to a short decimal step (1, 1.2, 1.5, 2, 2.5, … × 10^n)
// so axis labels stay short.
func NiceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if f*p >= v {
			return f * p
		}
	}
	return 10 * p
}
