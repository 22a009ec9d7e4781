package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/monitor/npusmi"
	"github.com/npumon/npumon/tui/theme"
)

// DeviceFeed is the devices view's data: the newest device table of the
// host (npu-smi) or of a simulated runtime. Latest is called from the UI
// every tick while the view is shown and must return at once; a poller
// (monitor/devpoll) runs the tool in the background.
type DeviceFeed interface {
	Latest() npusmi.Sample
}

// devView is the devices view's state.
type devView struct {
	open    bool
	sample  npusmi.Sample
	top     int // first scrolled line
	version uint64
	// the producer's comparison, recomputed with the sample and the data
	pid      int
	reserved int64 // Σ reserved bytes over the Source's devices at their newest entry
	resOK    bool
}

// devicesShown reports whether the devices view fills the body.
func (m *Model) devicesShown() bool { return m.o.DevicesOnly || m.dv.open }

// toggleDevices opens or closes the devices view (key D).
func (m *Model) toggleDevices() {
	if m.o.Devices == nil {
		m.statusErr = "no device feed here"
		return
	}
	m.dv.open = !m.dv.open
	if m.dv.open {
		m.dv.top = 0
		m.refreshDevices(true)
	}
}

// refreshDevices takes the feed's newest sample; it reports a change.
func (m *Model) refreshDevices(force bool) bool {
	if m.o.Devices == nil || !m.devicesShown() {
		return false
	}
	s := m.o.Devices.Latest()
	var v uint64
	if m.o.Source != nil {
		v = m.o.Source.Version()
	}
	pid := 0
	if m.o.ProducerPID != nil {
		pid = m.o.ProducerPID()
	}
	if !force && s.Seq == m.dv.sample.Seq && s.Source == m.dv.sample.Source && v == m.dv.version && pid == m.dv.pid {
		return false
	}
	m.dv.sample, m.dv.version, m.dv.pid = s, v, pid
	m.dv.reserved, m.dv.resOK = m.reservedNow()
	m.dirty = true
	return true
}

// reservedNow sums the allocator's reserved bytes over the Source's devices
// at their newest entries.
func (m *Model) reservedNow() (int64, bool) {
	src := m.o.Source
	if src == nil || m.loading {
		return 0, false
	}
	var sum int64
	devs := src.Devices()
	for _, d := range devs {
		_, last := src.Bounds(d)
		sum += src.Summary(d, last).ReservedBytes
	}
	return sum, len(devs) > 0
}

// onDevicesKey handles keys while the devices view is shown.
func (m *Model) onDevicesKey(msg tea.KeyMsg) tea.Cmd {
	k := m.keys
	switch {
	case key.Matches(msg, k.Up):
		m.dv.top = max(0, m.dv.top-1)
	case key.Matches(msg, k.Down):
		m.dv.top++ // settleDevices clamps it
	case key.Matches(msg, k.PageUp):
		m.dv.top = max(0, m.dv.top-max(1, m.h-6))
	case key.Matches(msg, k.PageDown):
		m.dv.top += max(1, m.h-6)
	case key.Matches(msg, k.Start, k.Home):
		m.dv.top = 0
	case key.Matches(msg, k.End, k.EndList):
		m.dv.top = 1 << 30 // the last page
	case !m.o.DevicesOnly && key.Matches(msg, k.Back, k.Devices):
		m.dv.open = false
	}
	return nil
}

func (m *Model) devicesHint() string {
	if m.o.DevicesOnly {
		return "↑/↓ scroll · ? help · q quits"
	}
	return "↑/↓ scroll · D or esc back · ? help · q quits"
}

// devicesHeader is the header of npumon devices --watch.
func (m *Model) devicesHeader() []string {
	th := m.th
	sep := th.Dim.Render(" " + th.G.VBar + " ")
	l1 := []string{th.Header.Render("npumon devices"), m.o.SourceName, th.Mode.Render("LIVE")}
	in := m.dv.sample.Info
	if in == nil {
		return []string{strings.Join(l1, sep), ""}
	}
	npus := map[int]bool{}
	var used, total int64
	for _, c := range in.Chips {
		npus[c.NPU] = true
		u, t, _, _ := c.DeviceMemory()
		used, total = used+u, total+t
	}
	parts := []string{
		fmt.Sprintf("%d NPU(s), %d chip(s)", len(npus), len(in.Chips)),
		fmt.Sprintf("memory %s / %s", bytesize.Format(used), bytesize.Format(total)),
		fmt.Sprintf("%d process(es)", len(in.Procs)),
	}
	return []string{strings.Join(l1, sep), packParts(parts, m.w, -1)}
}

// devicesLines renders the devices view in body rows: a status line, a
// row per chip (memory bar, AICore, power, temperature, health), then the
// process table and the producer's comparison.
func (m *Model) devicesLines(body int) []string {
	th := m.th
	s := m.dv.sample
	status := m.devicesStatus()
	if s.Info == nil {
		if s.Err != nil {
			return centered(body, m.w, th.Warn.Render(s.Err.Error()), "",
				th.Dim.Render("npumon reads npu-smi: give its path with --npu-smi or NPUMON_NPU_SMI"))
		}
		return centered(body, m.w, "reading "+s.Source+"…")
	}
	heads, lines := m.devicesContent()
	out := append([]string{status}, heads...)
	rows := body - len(out)
	maxTop := max(0, len(lines)-rows)
	top := clampInt(m.dv.top, 0, maxTop) // settleDevices keeps it in range
	end := min(len(lines), top+rows)
	out = append(out, lines[top:end]...)
	if maxTop > 0 && len(out) == body {
		// say there is more, on the last row
		out[body-1] = th.Dim.Render(fmt.Sprintf("… %d of %d lines (↑/↓)", end, len(lines)))
	}
	for len(out) < body {
		out = append(out, "")
	}
	return out[:body]
}

// devicesContent is the devices view's column heads, which stay put, and
// the lines that scroll under them (none before the first sample).
func (m *Model) devicesContent() (heads, lines []string) {
	if m.dv.sample.Info == nil {
		return nil, nil
	}
	lines = m.chipLines(m.dv.sample.Info)
	heads = lines[:1]
	lines = append(lines[1:len(lines):len(lines)], "")
	lines = append(lines, m.procLines(m.dv.sample.Info)...)
	return heads, lines
}

// settleDevices keeps the devices view's scroll inside its lines after a
// message (a key, a new sample, a resize). View only draws.
func (m *Model) settleDevices() {
	if !m.devicesShown() {
		return
	}
	heads, lines := m.devicesContent()
	rows := m.h - headerRows - hintRows - 1 - len(heads)
	m.dv.top = clampInt(m.dv.top, 0, max(0, len(lines)-rows))
}

// devicesStatus is the first line: what was read, when, and a failed poll.
func (m *Model) devicesStatus() string {
	th := m.th
	s := m.dv.sample
	var parts []string
	src := s.Source
	if s.Info != nil && s.Info.Version != "" {
		src += " " + s.Info.Version
	}
	parts = append(parts, src)
	if !s.At.IsZero() {
		parts = append(parts, "read "+s.At.In(m.o.Location).Format("15:04:05"))
	}
	if s.Every > 0 {
		parts = append(parts, "every "+s.Every.String())
	}
	line := th.Dim.Render(strings.Join(parts, " · "))
	if s.Err != nil && s.Info != nil {
		line = th.Warn.Render("last poll failed: "+s.Err.Error()) + "  " + line
	}
	return line
}

// chipLabel names a chip: "3", or "3.1" where an NPU holds several chips.
func chipLabel(in *npusmi.Info, c npusmi.Chip) string {
	for _, o := range in.Chips {
		if o.Chip != 0 {
			return fmt.Sprintf("%d.%d", c.NPU, c.Chip)
		}
	}
	return fmt.Sprint(c.NPU)
}

func (m *Model) chipLines(in *npusmi.Info) []string {
	th := m.th
	memName := "HBM"
	for _, c := range in.Chips {
		if !c.HBMOK {
			memName = "Memory"
		}
	}
	const pre = "%-5s %-11s %-7s %7s %5s %6s  "
	head := fmt.Sprintf(pre, "NPU", "Name", "Health", "Power", "Temp", "AICore") + memName
	lines := []string{th.Dim.Render(head)}
	fixed := theme.Width(fmt.Sprintf(pre, "", "", "", "", "", ""))
	for _, c := range in.Chips {
		power, temp, aic := "NA", "NA", "NA"
		if c.PowerOK {
			power = fmt.Sprintf("%.1fW", c.Power)
		}
		if c.TempOK {
			temp = fmt.Sprintf("%dC", c.TempC)
		}
		if c.AICoreOK {
			aic = fmt.Sprintf("%d%%", c.AICore)
		}
		health := c.Health
		if health != "OK" {
			health = th.Warn.Render(fmt.Sprintf("%-7s", health))
		} else {
			health = fmt.Sprintf("%-7s", health)
		}
		row := fmt.Sprintf("%-5s %-11s ", chipLabel(in, c), cut(c.Name, 11)) + health +
			fmt.Sprintf(" %7s %5s %6s  ", power, temp, aic)
		used, total, _, ok := c.DeviceMemory()
		if ok {
			figs := " " + bytesize.Format(used) + " / " + bytesize.Format(total)
			barW := m.w - fixed - theme.Width(figs)
			row += m.bar(used, total, barW) + figs
		} else {
			row += "NA"
		}
		lines = append(lines, row)
	}
	return lines
}

// bar draws used of total in w cells ([███····]).
func (m *Model) bar(used, total int64, w int) string {
	if w < 4 {
		return ""
	}
	in := w - 2
	n := 0
	if total > 0 {
		n = int(float64(in)*float64(used)/float64(total) + 0.5)
		if used > 0 && n == 0 {
			n = 1 // any use shows
		}
	}
	n = clampInt(n, 0, in)
	g := m.th.G
	var sb strings.Builder
	sb.WriteString("[")
	m.th.Wrap(&sb, &m.th.AllocArea, strings.Repeat(string(g.Allocated), n))
	m.th.Wrap(&sb, &m.th.Free, strings.Repeat(string(g.Free), in-n))
	sb.WriteString("]")
	return sb.String()
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// procLines is the process table, the producer's row marked, and the
// comparison of its device memory with its allocator's reserved bytes.
func (m *Model) procLines(in *npusmi.Info) []string {
	th := m.th
	lines := []string{th.Title.Render("Processes"), th.Dim.Render(fmt.Sprintf("  %-5s %-9s %-24s %10s", "NPU", "PID", "Name", "Memory"))}
	if len(in.Procs) == 0 {
		lines = append(lines, th.Dim.Render("  no processes hold device memory"))
	}
	var mine int64
	found := false
	for _, p := range in.Procs {
		mark := "  "
		if m.dv.pid > 0 && p.PID == m.dv.pid {
			mark = th.G.Selected + " "
			mine += p.MemMB * npusmi.MiB
			found = true
		}
		label := chipLabel(in, npusmi.Chip{NPU: p.NPU, Chip: p.Chip})
		lines = append(lines, fmt.Sprintf("%s%-5s %-9d %-24s %10s", mark, label, p.PID, cut(p.Name, 24), bytesize.Format(p.MemMB*npusmi.MiB)))
	}
	if m.dv.pid <= 0 {
		return lines
	}
	lines = append(lines, "")
	switch {
	case !found:
		lines = append(lines, theme.Wrap(fmt.Sprintf("pid %d (the producer) is not in the process table: another host, "+
			"another pid namespace, or no device memory yet.", m.dv.pid), m.w)...)
	case !m.dv.resOK:
		lines = append(lines, fmt.Sprintf("%s pid %d: device memory %s; the allocator has no data yet", th.G.Selected, m.dv.pid, bytesize.Format(mine)))
	default:
		lines = append(lines,
			fmt.Sprintf("%s pid %d: device memory %s · allocator reserved %s", th.G.Selected, m.dv.pid, bytesize.Format(mine), bytesize.Format(m.dv.reserved)),
			"  "+th.Header.Render(bytesize.Format(mine-m.dv.reserved))+" outside the caching allocator")
	}
	return lines
}
