package theme

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Canvas is a grid of runes with one style per cell, rendered one
// run of equal style at a time instead of one lipgloss call per cell.
type Canvas struct {
	W, H   int
	Runes  []rune
	Styles []*lipgloss.Style // nil: unstyled
}

// NewCanvas returns a blank w×h canvas.
func NewCanvas(w, h int) *Canvas {
	if w < 0 {
		w = 0
	}
	if h < 0 {
		h = 0
	}
	c := &Canvas{W: w, H: h, Runes: make([]rune, w*h), Styles: make([]*lipgloss.Style, w*h)}
	for i := range c.Runes {
		c.Runes[i] = ' '
	}
	return c
}

// Set puts r with style s at (x, y); out-of-range writes are ignored.
func (c *Canvas) Set(x, y int, r rune, s *lipgloss.Style) {
	if x < 0 || y < 0 || x >= c.W || y >= c.H {
		return
	}
	c.Runes[y*c.W+x] = r
	c.Styles[y*c.W+x] = s
}

// At returns the rune at (x, y).
func (c *Canvas) At(x, y int) rune {
	if x < 0 || y < 0 || x >= c.W || y >= c.H {
		return 0
	}
	return c.Runes[y*c.W+x]
}

// Text writes s from (x, y) rightwards, clipped to the canvas.
func (c *Canvas) Text(x, y int, s string, st *lipgloss.Style) int {
	for _, r := range s {
		c.Set(x, y, r, st)
		x++
	}
	return x
}

// Clone returns a deep copy.
func (c *Canvas) Clone() *Canvas {
	d := &Canvas{W: c.W, H: c.H, Runes: append([]rune(nil), c.Runes...), Styles: append([]*lipgloss.Style(nil), c.Styles...)}
	return d
}

// StringWith renders the canvas as newline-separated rows, wrapping each
// run of equal style in th's cached escape sequences (much cheaper than a
// lipgloss Render per run).
func (c *Canvas) StringWith(th *Theme) string {
	var sb, run strings.Builder
	for y := 0; y < c.H; y++ {
		if y > 0 {
			sb.WriteByte('\n')
		}
		row := y * c.W
		for x := 0; x < c.W; {
			st := c.Styles[row+x]
			run.Reset()
			for x < c.W && c.Styles[row+x] == st {
				run.WriteRune(c.Runes[row+x])
				x++
			}
			if st == nil {
				sb.WriteString(run.String())
			} else {
				th.Wrap(&sb, st, run.String())
			}
		}
	}
	return sb.String()
}
