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
	"github.com/npumon/npumon/internal/cells"
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

// devView is the devices view (D, and npumon devices --watch): the feed's
// newest sample, the producer's comparison and the scroll. What it reads
// besides the shared context is fixed when the Model is made (newDevView).
type devView struct {
	feed        DeviceFeed              // Options.Devices; nil: no devices view
	producerPID func() int              // Options.ProducerPID
	memUsage    func() []*memusage.File // Options.MemUsage
	only        bool                    // Options.DevicesOnly: the view is the whole program
	sourceName  string                  // Options.SourceName, for its header

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

func newDevView(o Options) devView {
	return devView{feed: o.Devices, producerPID: o.ProducerPID, memUsage: o.MemUsage, only: o.DevicesOnly, sourceName: o.SourceName}
}

// shown reports whether the devices view fills the body.
func (v *devView) shown() bool { return v.only || v.open }

// devicesShown reports whether the devices view fills the body.
func (m *Model) devicesShown() bool { return m.vw.dev.shown() }

// toggleDevices opens or closes the devices view (key D).
func (m *Model) toggleDevices() {
	if m.o.Devices == nil {
		m.sl.err = "no device feed here"
		return
	}
	m.vw.dev.open = !m.vw.dev.open
	if m.vw.dev.open {
		m.vw.dev.top = 0
		m.refreshDevices(true)
	}
}

// refreshDevices takes the feed's newest sample (paired with the Source
// once it has loaded); it reports a change.
func (m *Model) refreshDevices(force bool) bool {
	src := m.o.Source
	if m.ld.loading {
		src = nil
	}
	if m.vw.dev.refresh(m.o.Source, src, force) {
		m.dirty = true
		return true
	}
	return false
}

// refresh takes the feed's newest sample; it reports a change. ver is the
// Source whose version counts, pair the one to pair the sample with (nil
// while it loads).
func (v *devView) refresh(ver, pair Source, force bool) bool {
	if v.feed == nil || !v.shown() {
		return false
	}
	s := v.feed.Latest()
	var sv uint64
	if ver != nil {
		sv = ver.Version()
	}
	pid := 0
	if v.producerPID != nil {
		pid = v.producerPID()
	}
	var mem []*memusage.File
	if v.memUsage != nil {
		mem = v.memUsage()
	}
	if !force && s.Seq == v.sample.Seq && s.Source == v.sample.Source && sv == v.version && pid == v.pid && slices.Equal(mem, v.mem) {
		return false
	}
	v.mem = mem
	if pid != v.pid {
		v.pair = devPair{}
	}
	v.sample, v.version, v.pid = s, sv, pid
	v.cur = pairSample(pair, s, pid)
	if v.cur.Paired {
		v.pair = v.cur
	}
	return true
}

// update handles keys while the devices view is shown.
func (v *devView) update(c *paneCtx, msg tea.KeyMsg) {
	k := c.keys
	switch {
	case key.Matches(msg, k.Up):
		v.top = max(0, v.top-1)
	case key.Matches(msg, k.Down):
		v.top++ // settle clamps it
	case key.Matches(msg, k.PageUp):
		v.top = max(0, v.top-max(1, c.h-6))
	case key.Matches(msg, k.PageDown):
		v.top += max(1, c.h-6)
	case key.Matches(msg, k.Start, k.Home):
		v.top = 0
	case key.Matches(msg, k.End, k.EndList):
		v.top = 1 << 30 // the last page
	case !v.only && key.Matches(msg, k.Back, k.Devices):
		v.open = false
	}
}

// hint is the hint line while the view is shown.
func (v *devView) hint() string {
	if v.only {
		return "↑/↓ scroll · ? help · q quits"
	}
	return "↑/↓ scroll · D or esc back · ? help · q quits"
}

// header is the header of npumon devices --watch.
func (v *devView) header(c *paneCtx) []string {
	th := c.th
	sep := th.Dim.Render(" " + th.G.VBar + " ")
	l1 := []string{th.Header.Render("npumon devices"), v.sourceName, th.Mode.Render("LIVE")}
	in := v.sample.Info
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
	return []string{strings.Join(l1, sep), packParts(parts, c.w, -1)}
}

// lines renders the devices view in body rows: a status line, a
// row per chip (memory bar, AICore, power, temperature, health), then the
// process table and the producer's comparison.
func (v *devView) lines(c *paneCtx, body int) []string {
	th := c.th
	s := v.sample
	status := v.status(c)
	if s.Info == nil && len(v.mem) == 0 {
		if s.Err != nil {
			return centered(body, c.w, th.Warn.Render(s.Err.Error()), "",
				th.Dim.Render("npumon reads npu-smi: give its path with --npu-smi or NPUMON_NPU_SMI"))
		}
		return centered(body, c.w, "reading "+s.Source+"…")
	}
	if s.Info == nil { // no table, but the capture's memUsageInfo
		status = th.Dim.Render("reading " + s.Source + "…")
		if s.Err != nil {
			status = th.Warn.Render(s.Err.Error())
		}
	}
	heads, lines := v.content(c)
	out := append([]string{status}, heads...)
	rows := body - len(out)
	maxTop := max(0, len(lines)-rows)
	top := clampInt(v.top, 0, maxTop) // settle keeps it in range
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

// content is the devices view's column heads, which stay put, and
// the lines that scroll under them (none before the first sample).
func (v *devView) content(c *paneCtx) (heads, lines []string) {
	if v.sample.Info == nil {
		if len(v.mem) > 0 {
			return nil, v.memLines(c)
		}
		return nil, nil
	}
	lines = v.chipLines(c, v.sample.Info)
	heads = lines[:1]
	lines = append(lines[1:len(lines):len(lines)], "")
	lines = append(lines, v.procLines(c, v.sample.Info)...)
	if len(v.mem) > 0 {
		lines = append(append(lines, ""), v.memLines(c)...)
	}
	return heads, lines
}

// maxMemModules bounds the modules listed per memUsageInfo file.
const maxMemModules = 12

// memLines lists the capture's memUsageInfo CSVs: per device the memory
// each module held outside the caching allocator when the snapshot was
// dumped, most first.
func (v *devView) memLines(c *paneCtx) []string {
	th := c.th
	lines := []string{th.Title.Render("Outside the caching allocator, by module") + th.Dim.Render(" (torch_npu memUsageInfo, at the dump)")}
	for _, f := range v.mem {
		head := fmt.Sprintf("  device %d · %s", f.Device, filepath.Base(f.Path))
		if !f.Stamp.IsZero() {
			head += " · " + f.Stamp.Format("2006-01-02 15:04:05")
		}
		lines = append(lines, th.Dim.Render(cells.TruncRight(head, max(c.w, 10))))
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
			lines = append(lines, fmt.Sprintf("    %s %10s  peak %10s", cells.Pad(x.Name, 20), bytesize.Format(x.Cur), bytesize.Format(x.Peak)))
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

// settle keeps the devices view's scroll inside its lines after a
// message (a key, a new sample, a resize). View only draws.
func (v *devView) settle(c *paneCtx) {
	if !v.shown() {
		return
	}
	heads, lines := v.content(c)
	rows := c.h - headerRows - hintRows - 1 - len(heads)
	v.top = clampInt(v.top, 0, max(0, len(lines)-rows))
}

// status is the first line: what was read, when, and a failed poll.
func (v *devView) status(c *paneCtx) string {
	th := c.th
	s := v.sample
	var parts []string
	src := s.Source
	if s.Info != nil && s.Info.Version != "" {
		src += " " + s.Info.Version
	}
	parts = append(parts, src)
	if !s.At.IsZero() {
		parts = append(parts, "read "+s.At.In(c.tf.loc).Format("15:04:05"))
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

func (v *devView) chipLines(pc *paneCtx, in *npusmi.Info) []string {
	th := pc.th
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
		row := fmt.Sprintf("%-5s %s ", chipLabel(in, c), cells.Pad(c.Name, 11)) + health +
			fmt.Sprintf(" %7s %5s %6s  ", power, temp, aic)
		used, total, _, ok := c.DeviceMemory()
		if ok {
			figs := " " + bytesize.Format(used) + " / " + bytesize.Format(total)
			barW := pc.w - fixed - theme.Width(figs)
			row += v.bar(pc, used, total, barW) + figs
		} else {
			row += "NA"
		}
		lines = append(lines, row)
	}
	return lines
}

// dimWrap wraps s to the width, each line indented by two and dim.
func (v *devView) dimWrap(c *paneCtx, s string) []string {
	ls := theme.Wrap(s, max(c.w-2, 10))
	for i, l := range ls {
		ls[i] = "  " + c.th.Dim.Render(l)
	}
	return ls
}

// bar draws used of total in w cells ([███····]).
func (v *devView) bar(c *paneCtx, used, total int64, w int) string {
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
	g := c.th.G
	var sb strings.Builder
	sb.WriteString("[")
	c.th.Wrap(&sb, &c.th.AllocArea, strings.Repeat(string(g.Allocated), n))
	c.th.Wrap(&sb, &c.th.Free, strings.Repeat(string(g.Free), in-n))
	sb.WriteString("]")
	return sb.String()
}

// procLines is the process table, the producer's row marked, and the
// comparison of its device memory with its allocator's reserved bytes.
func (v *devView) procLines(c *paneCtx, in *npusmi.Info) []string {
	th := c.th
	lines := []string{th.Title.Render("Processes"), th.Dim.Render(fmt.Sprintf("  %-5s %-9s %-24s %10s", "NPU", "PID", "Name", "Memory"))}
	if len(in.Procs) == 0 {
		lines = append(lines, th.Dim.Render("  no processes hold device memory"))
	}
	for _, p := range in.Procs {
		mark := "  "
		if v.pid > 0 && p.PID == v.pid {
			mark = th.G.Selected + " "
		}
		label := chipLabel(in, npusmi.Chip{NPU: p.NPU, Chip: p.Chip})
		lines = append(lines, fmt.Sprintf("%s%-5s %-9d %s %10s", mark, label, p.PID, cells.Pad(p.Name, 24), bytesize.Format(p.MemMB*npusmi.MiB)))
	}
	if v.pid <= 0 {
		return lines
	}
	lines = append(lines, "")
	cur, pair := v.cur, v.pair
	clock := func(t time.Time) string { return t.In(c.tf.loc).Format("15:04:05.000") }
	switch {
	case !cur.Found:
		lines = append(lines, theme.Wrap(fmt.Sprintf("pid %d (the producer) is not in the process table: another host, "+
			"another pid namespace, or no device memory yet.", v.pid), c.w)...)
	case pair.Paired:
		lines = append(lines,
			fmt.Sprintf("%s pid %d: device memory %s · allocator reserved %s", th.G.Selected, v.pid, bytesize.Format(pair.Mine), bytesize.Format(pair.Reserved)),
			th.Dim.Render("  both at "+clock(pair.At)+": npu-smi's reading and the allocator's state then"),
			"  "+th.Header.Render(bytesize.Format(pair.Mine-pair.Reserved))+" outside the caching allocator")
		if !cur.Paired && !cur.At.Equal(pair.At) {
			lines = append(lines, v.dimWrap(c, "the newer reading of "+clock(cur.At)+" waits for the allocator's entries to reach it")...)
		}
	case cur.Newest == 0:
		lines = append(lines, fmt.Sprintf("%s pid %d: device memory %s; the allocator has no data yet", th.G.Selected, v.pid, bytesize.Format(cur.Mine)))
	default:
		lines = append(lines, fmt.Sprintf("%s pid %d: device memory %s at %s", th.G.Selected, v.pid, bytesize.Format(cur.Mine), clock(cur.At)))
		lines = append(lines, v.dimWrap(c, fmt.Sprintf("the allocator's entries span other times (newest %s): "+
			"no comparison until its state at the reading's moment is known", clock(time.UnixMicro(cur.Newest))))...)
	}
	return lines
}
