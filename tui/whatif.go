package tui

import (
	"context"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/replay/whatif"
	tuiwhatif "github.com/npumon/npumon/tui/whatif"
)

// openWhatIf re-simulates the current device's trace under the what-if
// alternatives and shows the comparison in place of the panes (w).
func (m *Model) openWhatIf() tea.Cmd {
	if m.o.WhatIf == nil {
		m.sl.err = "what-if needs a snapshot file (npumon replay FILE)"
		return nil
	}
	if m.o.Simulate == nil {
		m.sl.err = "what-if is not available here"
		return nil
	}
	capt := m.o.WhatIf()
	if capt == nil {
		m.sl.err = "what-if: the snapshot is not loaded yet"
		return nil
	}
	var opts whatif.Options
	if m.d.dev >= 0 {
		opts.Devices = []int{m.d.dev}
	}
	opts.Confs = m.o.WhatIfConfs
	if len(opts.Confs) == 0 { // the one set whatif and explain try too
		opts.Confs = whatif.Alternatives(capt.Snapshot, opts.Devices)
	}
	m.vw.wi.open = true
	m.vw.wi.v.SetSize(m.w, max(0, m.h-headerRows-hintRows))
	m.vw.wi.v.SetHint(false) // the hint line shows its keys
	m.vw.wi.v.XLabel = func(t, span int64) string {
		tf := m.timeFmt()
		tf.span = span
		return tf.axis(float64(t-tf.first) / 1e6)
	}
	return m.vw.wi.v.Start(context.Background(), m.o.Simulate, capt, opts)
}

// updateWhatIf takes the what-if view's own messages.
func (m *Model) updateWhatIf(msg tea.Msg) (handled bool, cmd tea.Cmd) {
	switch msg := msg.(type) {
	case tuiwhatif.ResultMsg:
		m.vw.wi.v, cmd = m.vw.wi.v.Update(msg)
		m.dirty = true
		return true, cmd
	case tuiwhatif.CloseMsg:
		m.vw.wi.open = false
		m.dirty = true
		return true, nil
	}
	return false, nil
}

// onWhatIfKey hands a key to the open what-if view (esc and w close it).
func (m *Model) onWhatIfKey(msg tea.KeyMsg) tea.Cmd {
	var cmd tea.Cmd
	m.vw.wi.v, cmd = m.vw.wi.v.Update(msg)
	return cmd
}

// whatIfLines renders the what-if view in the body's rows.
func (m *Model) whatIfLines(body int) []string {
	return strings.Split(m.vw.wi.v.View(), "\n")
}
