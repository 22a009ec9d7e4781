package tui

import (
	"fmt"
	"strconv"
	"strings"
)

// retainNote is the header's word on a retention window: how many entries
// were thinned and from when the detail is held ("" when nothing was).
func (m *Model) retainNote(wide bool) string {
	if m.d.thinned <= 0 {
		return ""
	}
	if !wide {
		return countText(m.d.thinned) + " thinned"
	}
	from, _, _ := strings.Cut(m.timeFmt().clock(m.d.detail), ".") // seconds suffice here
	return fmt.Sprintf("history: %s entries thinned, detail from %s", countText(m.d.thinned), from)
}

// countText writes a count with k/M/G steps (12.3 M).
func countText(n int64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 1, 64) + " G"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " M"
	case n >= 1e4:
		return strconv.FormatFloat(float64(n)/1e3, 'f', 1, 64) + " k"
	}
	return strconv.FormatInt(n, 10)
}
