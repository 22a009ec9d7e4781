package tui

// screen is what fills the body between the header and the hint line. One
// function decides it, in one order of precedence, for Update (which keys
// go where), View (what is drawn) and the hint line (which keys it lists).
// A text prompt (/ or t) is not a screen: it takes the hint line over
// whatever screen is up.
type screen uint8

const (
	screenPanes   screen = iota // timeline, segments, events, ops
	screenHelp                  // ? — over everything
	screenDevices               // D — the host's devices
	screenPicker                // c — a watched directory's captures
	screenWhatIf                // w — other allocator settings
	screenView                  // h, v, o — holders, a stack, the OOM panel
	screenLoading               // a load in progress, or its error
	screenWaiting               // a source with no data yet
)

// screen returns the screen shown now.
func (m *Model) screen() screen {
	switch {
	case m.vw.help.shown:
		return screenHelp
	case m.vw.dev.shown():
		return screenDevices
	case m.vw.pick.shown:
		return screenPicker
	case m.vw.wi.open:
		return screenWhatIf
	case m.vw.x.open() && m.d.hasData:
		return screenView
	case !m.d.hasData && (m.ld.loading || m.ld.loadErr != nil):
		return screenLoading // once data shows, the panes show it as it loads
	case !m.d.hasData:
		return screenWaiting
	}
	return screenPanes
}
