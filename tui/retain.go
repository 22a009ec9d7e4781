package tui

import (
	"fmt"
	"strings"
)

// retainNote is the header's word on a retention window: how many entries
// were thinned and from when the detail is held ("" when nothing was).
func (m *Model) retainNote(wide bool) string {
	if m.d.thinned <= 0 {
		return ""
	}
	if !wide {
		return countText(float64(m.d.thinned)) + " thinned"
	}
	from, _, _ := strings.Cut(m.timeFmt().clock(m.d.detail), ".") // seconds suffice here
	return fmt.Sprintf("history: %s entries thinned, detail from %s", countText(float64(m.d.thinned)), from)
}
