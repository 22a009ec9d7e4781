package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
)

// holder is what a watched directory's Captures offers so that working in
// the view is not interrupted: while held, new captures are listed and
// counted but the open one stays (*watch.DirSource has it).
type holder interface {
	SetHold(on bool)
	NewCaptures() int
	FollowNewest() error
}

// working reports whether the user is working in the open capture: paused
// (not following the newest data), a block selected in the segment map, the
// what-if view or an explain view (holders, a stack, the OOM panel) open, or
// mark A set.
func (m *Model) working() bool {
	return (m.o.Live && !m.cur.follow) || m.p.seg.seg.InBlocks() || m.vw.wi.open || m.vw.x.open() || m.vw.x.markN >= 0
}

// syncHold tells a watched directory whether to hold the open capture.
func (m *Model) syncHold() {
	if h, ok := m.o.Captures.(holder); ok {
		h.SetHold(m.working())
	}
}

// newCapturesNote is the header's "N new captures" while the open capture
// is held and others have landed; "" otherwise.
func (m *Model) newCapturesNote() string {
	h, ok := m.o.Captures.(holder)
	if !ok {
		return ""
	}
	switch n := h.NewCaptures(); n {
	case 0:
		return ""
	case 1:
		return "1 new capture (f follows)"
	default:
		return fmt.Sprintf("%d new captures (f follows)", n)
	}
}

// followNewest is f in a watched directory: open the newest capture (off
// the UI goroutine, as the picker does) and follow again.
func (m *Model) followNewest() tea.Cmd {
	h, ok := m.o.Captures.(holder)
	if !ok {
		return nil
	}
	h.SetHold(false)
	return func() tea.Msg {
		err := h.FollowNewest()
		return pickerOpenedMsg{err: err}
	}
}
