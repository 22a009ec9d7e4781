package tui

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/monitor/npusmi"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay/memusage"
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
	pid  int
	cur  devPair // the newest sample's, paired or not
	pair devPair // the newest paired one (Paired false: none yet)
	// mem: torch_npu's memUsageInfo CSVs of the capture (Options.MemUsage)
	mem []*memusage.File
}

// devPair sets the producer's device memory from one npu-smi reading next
// to the allocator's reserved bytes at the moment of that reading. The two
// are compared only when paired: a reading against the allocator's newest
// entry compares two moments (a poll and an entry up to an interval apart),
// and while a step allocates and frees GiBs the difference swings by as
// much.
type devPair struct {
	Found bool      // the pid is in the reading's process table
	Mine  int64     // Σ its process memory (bytes) in the reading
	At    time.Time // the reading's moment (npusmi.Sample.At)
	// Paired: every device of the Source has entries up to At or past it,
	// so Reserved is what the allocator held at At; else Reserved is unset
	// and Newest says how far the Source's entries reach (µs; 0: none).
	Paired   bool
	Reserved int64
	Newest   int64
}

// pairSample pairs sample s for process pid with src: the pid's memory in
// the reading, and Σ reserved bytes over src's devices at the reading's
// own moment — paired only where that moment lies inside every device's
// log (first ≤ At ≤ last, on the epoch clock): past the newest entry the
// Source cannot know yet what the allocator held then.
func pairSample(src Source, s npusmi.Sample, pid int) devPair {
	var p devPair
	if s.Info == nil || pid <= 0 {
		return p
	}
	for _, pr := range s.Info.Procs {
		if pr.PID == pid {
			p.Found = true
			p.Mine += pr.MemMB * npusmi.MiB
		}
	}
	p.At = s.At
	if !p.Found || src == nil || s.At.IsZero() {
		return p
	}
	at := s.At.UnixMicro()
	devs := src.Devices()
	p.Paired = len(devs) > 0
	for i, d := range devs {
		first, last := src.Bounds(d)
		if i == 0 || last < p.Newest {
			p.Newest = last
		}
		if src.TimeBase(d) != store.TimeEpochUS || src.Len(d) == 0 || at < first || at > last {
			p.Paired = false
			continue
		}
		p.Reserved += src.Summary(d, at).ReservedBytes
	}
	if !p.Paired {
		p.Reserved = 0
	}
	return p
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
	var mem []*memusage.File
	if m.o.MemUsage != nil {
		mem = m.o.MemUsage()
	}
	if !force && s.Seq == m.dv.sample.Seq && s.Source == m.dv.sample.Source && v == m.dv.version && pid == m.dv.pid && slices.Equal(mem, m.dv.mem) {
		return false
	}
	m.dv.mem = mem
	if pid != m.dv.pid {
		m.dv.pair = devPair{}
	}
	m.dv.sample, m.dv.version, m.dv.pid = s, v, pid
	src := m.o.Source
	if m.loading {
		src = nil
	}
	m.dv.cur = pairSample(src, s, pid)
	if m.dv.cur.Paired {
		m.dv.pair = m.dv.cur
	}
	m.dirty = true
	return true
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
	if s.Info == nil && len(m.dv.mem) == 0 {
		if s.Err != nil {
			return centered(body, m.w, th.Warn.Render(s.Err.Error()), "",
				th.Dim.Render("npumon reads npu-smi: give its path with --npu-smi or NPUMON_NPU_SMI"))
		}
		return centered(body, m.w, "reading "+s.Source+"…")
	}
	if s.Info == nil { // no table, but the capture's memUsageInfo
		status = th.Dim.Render("reading " + s.Source + "…")
		if s.Err != nil {
			status = th.Warn.Render(s.Err.Error())
		}
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
		if len(m.dv.mem) > 0 {
			return nil, m.memLines()
		}
		return nil, nil
	}
	lines = m.chipLines(m.dv.sample.Info)
	heads = lines[:1]
	lines = append(lines[1:len(lines):len(lines)], "")
	lines = append(lines, m.procLines(m.dv.sample.Info)...)
	if len(m.dv.mem) > 0 {
		lines = append(append(lines, ""), m.memLines()...)
	}
	return heads, lines
}

// maxMemModules bounds the modules listed per memUsageInfo file.
const maxMemModules = 12

// memLines lists the capture's memUsageInfo CSVs: per device the memory
// each module held outside the caching allocator when the snapshot was
// dumped, most first.
func (m *Model) memLines() []string {
	th := m.th
	lines := []string{th.Title.Render("Outside the caching allocator, by module") + th.Dim.Render(" (torch_npu memUsageInfo, at the dump)")}
	for _, f := range m.dv.mem {
		head := fmt.Sprintf("  device %d · %s", f.Device, filepath.Base(f.Path))
		if !f.Stamp.IsZero() {
			head += " · " + f.Stamp.Format("2006-01-02 15:04:05")
		}
		lines = append(lines, th.Dim.Render(cut(head, max(m.w, 10))))
		var shown []memusage.Module
		for _, x := range f.Modules {
			if x.Cur > 0 || x.Peak > 0 {
				shown = append(shown, x)
			}
		}
		slices.SortStableFunc(shown, func(a, b memusage.Module) int { return cmpDesc(a.Cur, b.Cur) })
		if len(shown) == 0 {
			lines = append(lines, th.Dim.Render("    no module holds device memory"))
			continue
		}
		for i, x := range shown {
			if i == maxMemModules {
				lines = append(lines, th.Dim.Render(fmt.Sprintf("    … %d more", len(shown)-i)))
				break
			}
			lines = append(lines, fmt.Sprintf("    %-20s %10s  peak %10s", cut(x.Name, 20), bytesize.Format(x.Cur), bytesize.Format(x.Peak)))
		}
		lines = append(lines, fmt.Sprintf("    %-20s ", "total")+th.Header.Render(fmt.Sprintf("%10s", bytesize.Format(f.Total()))))
	}
	return lines
}

// cmpDesc orders larger first.
func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
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

// dimWrap wraps s to the width, each line indented by two and dim.
func (m *Model) dimWrap(s string) []string {
	ls := theme.Wrap(s, max(m.w-2, 10))
	for i, l := range ls {
		ls[i] = "  " + m.th.Dim.Render(l)
	}
	return ls
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
	for _, p := range in.Procs {
		mark := "  "
		if m.dv.pid > 0 && p.PID == m.dv.pid {
			mark = th.G.Selected + " "
		}
		label := chipLabel(in, npusmi.Chip{NPU: p.NPU, Chip: p.Chip})
		lines = append(lines, fmt.Sprintf("%s%-5s %-9d %-24s %10s", mark, label, p.PID, cut(p.Name, 24), bytesize.Format(p.MemMB*npusmi.MiB)))
	}
	if m.dv.pid <= 0 {
		return lines
	}
	lines = append(lines, "")
	cur, pair := m.dv.cur, m.dv.pair
	clock := func(t time.Time) string { return t.In(m.o.Location).Format("15:04:05.000") }
	switch {
	case !cur.Found:
		lines = append(lines, theme.Wrap(fmt.Sprintf("pid %d (the producer) is not in the process table: another host, "+
			"another pid namespace, or no device memory yet.", m.dv.pid), m.w)...)
	case pair.Paired:
		lines = append(lines,
			fmt.Sprintf("%s pid %d: device memory %s · allocator reserved %s", th.G.Selected, m.dv.pid, bytesize.Format(pair.Mine), bytesize.Format(pair.Reserved)),
			th.Dim.Render("  both at "+clock(pair.At)+": npu-smi's reading and the allocator's state then"),
			"  "+th.Header.Render(bytesize.Format(pair.Mine-pair.Reserved))+" outside the caching allocator")
		if !cur.Paired && !cur.At.Equal(pair.At) {
			lines = append(lines, m.dimWrap("the newer reading of "+clock(cur.At)+" waits for the allocator's entries to reach it")...)
		}
	case cur.Newest == 0:
		lines = append(lines, fmt.Sprintf("%s pid %d: device memory %s; the allocator has no data yet", th.G.Selected, m.dv.pid, bytesize.Format(cur.Mine)))
	default:
		lines = append(lines, fmt.Sprintf("%s pid %d: device memory %s at %s", th.G.Selected, m.dv.pid, bytesize.Format(cur.Mine), clock(cur.At)))
		lines = append(lines, m.dimWrap(fmt.Sprintf("the allocator's entries span other times (newest %s): "+
			"no comparison until its state at the reading's moment is known", clock(time.UnixMicro(cur.Newest))))...)
	}
	return lines
}
