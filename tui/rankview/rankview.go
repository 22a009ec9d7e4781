// Package rankview is the ranks overview: every rank of a job side by side
// (allocated / active / reserved now and at the peaks, as bars on one
// scale), the imbalance across ranks, OOM flags and the time of each rank's
// peak. enter opens one rank in the usual npumon view; esc there comes back.
package rankview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/internal/cells"
	"github.com/npumon/npumon/monitor/ranks"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

// Rank is one rank the overview shows.
type Rank struct {
	Rank  int
	Name  string // shown beside the rank: its capture's file or directory
	Store *store.Store
	// Load, when set, fills Store once (a capture file); nil for a Store
	// fed elsewhere (live).
	Load func(ctx context.Context, report func(store.LoadProgress)) error
}

// Options configure the overview.
type Options struct {
	Title string // the directory or source, shown in the header
	Ranks []Rank
	// Live: the Stores are being fed; the rank view opened by enter follows
	// the newest entry.
	Live           bool
	ASCII, NoColor bool
	Renderer       *lipgloss.Renderer
	Location       *time.Location // wall-clock times (default time.Local)
	Tick           time.Duration  // poll/redraw interval (default 200ms)
	// Open builds a rank's usual view (enter); without it enter does
	// nothing. The caller wires the terminal UI (tui.New) in: the overview
	// never imports its parent package.
	Open func(OpenSpec) Child
}

// OpenSpec is what the overview hands Open about the rank to show.
type OpenSpec struct {
	Rank           Rank
	Title          string // "rank N · name", for the view's header
	Device         int    // the rank's device
	Live           bool
	ASCII, NoColor bool
	Renderer       *lipgloss.Renderer
	Location       *time.Location
	Back           func() tea.Msg // esc in the view: back to the overview
}

// Child is the view a rank opens in (the terminal UI's *tui.Model).
type Child interface {
	Init() tea.Cmd
	Update(tea.Msg) (tea.Model, tea.Cmd)
	View() string
	Close()
}

type (
	tickMsg   time.Time
	loadedMsg struct {
		i   int
		err error
	}
	backMsg  struct{}
	childMsg struct {
		gen int
		msg tea.Msg
	}
)

// Model is the overview, and the rank view it opened.
type Model struct {
	o      Options
	th     *theme.Theme
	w, h   int
	sel    int
	top    int // first rank shown
	figs   []ranks.Figures
	have   []bool
	errs   []error
	loaded []bool
	vers   []uint64
	help   bool
	// permille loaded per rank, written by its loader (0 when unknown)
	permille []atomic.Int32
	// pending is the rank enter asked for while it was loading (-1: none):
	// it opens once loaded, unless the selection moves or esc cancels.
	pending int
	note    string // replaces the key hint until the next key
	cancel  context.CancelFunc
	ctx     context.Context

	child Child
	gen   int
}

// New returns the overview model.
func New(o Options) *Model {
	if o.Location == nil {
		o.Location = time.Local
	}
	if o.Tick <= 0 {
		o.Tick = 200 * time.Millisecond
	}
	if os.Getenv("NO_COLOR") != "" {
		o.NoColor = true
	}
	n := len(o.Ranks)
	ctx, cancel := context.WithCancel(context.Background())
	m := &Model{o: o, th: theme.New(o.Renderer, o.ASCII, o.NoColor), w: 80, h: 24,
		figs: make([]ranks.Figures, n), have: make([]bool, n), errs: make([]error, n), loaded: make([]bool, n),
		vers: make([]uint64, n), permille: make([]atomic.Int32, n), pending: -1, ctx: ctx, cancel: cancel}
	for i, r := range o.Ranks {
		m.figs[i] = ranks.Figures{Rank: r.Rank, Device: -1}
		m.loaded[i] = r.Load == nil
	}
	return m
}

// Run shows the overview until the user quits or ctx ends.
func Run(ctx context.Context, o Options, popts ...tea.ProgramOption) error {
	m := New(o)
	p := tea.NewProgram(m, append([]tea.ProgramOption{tea.WithAltScreen(), tea.WithContext(ctx)}, popts...)...)
	_, err := p.Run()
	m.Close()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Close stops the loaders and the open rank view.
func (m *Model) Close() {
	m.cancel()
	if m.child != nil {
		m.child.Close()
	}
}

// Figures returns the ranks' figures as last read (for tests).
func (m *Model) Figures() []ranks.Figures { return append([]ranks.Figures(nil), m.figs...) }

// Selected is the index of the selected rank.
func (m *Model) Selected() int { return m.sel }

// InRank reports whether a rank's view is open.
func (m *Model) InRank() bool { return m.child != nil }

func (m *Model) tick() tea.Cmd {
	return tea.Tick(m.o.Tick, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// Init starts the loaders and the tick.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.tick()}
	for i, r := range m.o.Ranks {
		if r.Load == nil {
			continue
		}
		load, ctx, pm := r.Load, m.ctx, &m.permille[i]
		report := func(p store.LoadProgress) { pm.Store(progressPermille(p)) }
		cmds = append(cmds, func() tea.Msg { return loadedMsg{i: i, err: load(ctx, report)} })
	}
	m.poll()
	return tea.Batch(cmds...)
}

// poll reads the figures of every rank whose Store changed.
func (m *Model) poll() {
	for i, r := range m.o.Ranks {
		if !m.loaded[i] || r.Store == nil {
			continue
		}
		if v := r.Store.Version(); v != m.vers[i] || !m.have[i] {
			m.vers[i] = v
			m.figs[i], m.have[i] = ranks.FromStore(r.Rank, r.Store)
		}
	}
}

// wrap tags a rank view's command with the view's generation, so messages
// of a closed view never reach a later one.
func (m *Model) wrap(c tea.Cmd) tea.Cmd {
	if c == nil {
		return nil
	}
	gen := m.gen
	return func() tea.Msg { return childMsg{gen: gen, msg: c()} }
}

// Update handles a message.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tickMsg:
		m.poll()
		return m, m.tick()
	case loadedMsg:
		m.loaded[msg.i], m.errs[msg.i] = true, msg.err
		m.poll()
		if msg.i == m.pending && m.child == nil {
			m.pending = -1
			return m, m.openRank(msg.i)
		}
		return m, nil
	case tea.WindowSizeMsg:
		m.w, m.h = msg.Width, msg.Height
		if m.child != nil {
			_, c := m.child.Update(msg)
			return m, m.wrap(c)
		}
		return m, nil
	case childMsg:
		if msg.gen != m.gen || m.child == nil {
			return m, nil
		}
		switch in := msg.msg.(type) {
		case nil:
			return m, nil
		case backMsg:
			m.closeRank()
			return m, nil
		case tea.QuitMsg:
			m.Close()
			return m, tea.Quit
		case tea.BatchMsg:
			cmds := make([]tea.Cmd, len(in))
			for i, c := range in {
				cmds[i] = m.wrap(c)
			}
			return m, tea.Batch(cmds...)
		default:
			_, c := m.child.Update(in)
			return m, m.wrap(c)
		}
	case tea.KeyMsg:
		if m.child != nil {
			_, c := m.child.Update(msg)
			return m, m.wrap(c)
		}
		return m, m.route(msg)
	}
	return m, nil
}

func (m *Model) route(k tea.KeyMsg) tea.Cmd {
	s := k.String()
	if s == "ctrl+c" || s == "q" {
		m.Close()
		return tea.Quit
	}
	if m.help {
		if s == "esc" || s == "?" {
			m.help = false
		}
		return nil
	}
	n := len(m.o.Ranks)
	m.note = ""
	if s != "enter" {
		m.pending = -1 // a pending open is for the rank selected when enter was pressed
	}
	switch s {
	case "?":
		m.help = true
	case "up", "k":
		m.sel = max(m.sel-1, 0)
	case "down", "j":
		m.sel = min(m.sel+1, n-1)
	case "home", "g":
		m.sel = 0
	case "end", "G":
		m.sel = n - 1
	case "enter":
		return m.openRank(m.sel)
	}
	return nil
}

// openRank opens rank i in the usual view; a rank still loading opens
// when it has loaded, one that failed says so in the hint line.
func (m *Model) openRank(i int) tea.Cmd {
	if i < 0 || i >= len(m.o.Ranks) || m.o.Open == nil {
		return nil
	}
	r := m.o.Ranks[i]
	switch {
	case !m.loaded[i]:
		m.pending = i
		m.note = fmt.Sprintf("rank %d is loading · it opens when loaded · esc cancels", r.Rank)
		return nil
	case m.errs[i] != nil:
		m.note = fmt.Sprintf("rank %d could not be read: nothing to open", r.Rank)
		return nil
	}
	m.gen++
	m.child = m.o.Open(OpenSpec{Rank: r, Title: fmt.Sprintf("rank %d · %s", r.Rank, cells.TruncTail(r.Name, 15)), Device: m.figs[i].Device,
		Live: m.o.Live, ASCII: m.o.ASCII, NoColor: m.o.NoColor, Renderer: m.o.Renderer, Location: m.o.Location,
		Back: func() tea.Msg { return backMsg{} }})
	initCmd := m.child.Init()
	m.child.Update(tea.WindowSizeMsg{Width: m.w, Height: m.h})
	return m.wrap(initCmd)
}

func (m *Model) closeRank() {
	m.child.Close()
	m.child = nil
	m.gen++
	m.poll()
}

// View draws the overview, or the open rank's view.
func (m *Model) View() string {
	if m.child != nil {
		return m.child.View()
	}
	if m.help {
		return m.frame(helpLines())
	}
	return m.frame(m.overview())
}

// frame fits lines to exactly w × h.
func (m *Model) frame(lines []string) string {
	out := make([]string, m.h)
	for i := range out {
		l := ""
		if i < len(lines) {
			l = lines[i]
		}
		if m.th.ASCII {
			l = theme.ToASCII(l)
		}
		out[i] = theme.Fit(l, m.w)
	}
	return strings.Join(out, "\n")
}

func helpLines() []string {
	return []string{
		"npumon ranks overview · keys",
		"",
		"  ↑/k ↓/j    select a rank",
		"  g / G      first / last rank",
		"  enter      open the selected rank in the usual view (one still",
		"             loading opens when loaded; moving or esc cancels)",
		"  esc        (in a rank's view) back to the overview",
		"  ?          this help (esc or ? closes it)",
		"  q          quit",
		"",
		"Each rank has two bars on one scale (the largest peak of all ranks):",
		"  now   the figures at the rank's newest entry",
		"  peak  each figure's own peak over the trace",
		"Allocated is drawn over active, active over reserved. 'peak at' is the",
		"time of the active-bytes peak. The imbalance line compares the peaks",
		"across ranks: max/min, and which rank holds each.",
	}
}

// column widths of the rank rows
const (
	colNum  = 10 // a size: " 12.3 MiB"
	colOOM  = 6
	colTime = 13
)

func (m *Model) overview() []string {
	if m.h < 2 {
		return nil
	}
	th := m.th
	var b strings.Builder
	styled := func(st *lipgloss.Style, s string) string {
		b.Reset()
		th.Wrap(&b, st, s)
		return b.String()
	}
	n := len(m.o.Ranks)
	loading := 0
	for i := range m.o.Ranks {
		if !m.loaded[i] {
			loading++
		}
	}
	head := fmt.Sprintf("npumon · ranks · %s · %d ranks", m.o.Title, n)
	if loading > 0 {
		head += fmt.Sprintf(" · loading %d", loading)
	}
	lines := []string{styled(&th.Header, head), m.imbalanceLine()}

	var scale int64
	for i, f := range m.figs {
		if m.have[i] {
			scale = max(scale, f.PeakReservedBytes, f.PeakActiveBytes, f.PeakRequestedBytes, f.ReservedBytes)
		}
	}
	g := th.G
	fixed := 2 + 5 + 4 + 5 + 1 + 3*colNum + colOOM + colTime
	barW := max(m.w-fixed, 8)
	legend := fmt.Sprintf("%c allocated  %c active  %c reserved   one scale: 0 … %s", g.AllocArea, g.Active, g.Reserved, bytesize.Format(scale))
	lines = append(lines, styled(&th.Dim, legend))
	hdr := fmt.Sprintf("  %-5s%-4s%-5s%-*s %*s%*s%*s%*s%*s", "rank", "dev", "", barW, "", colNum, "allocated", colNum, "active",
		colNum, "reserved", colOOM, "OOM", colTime, "peak at")
	lines = append(lines, styled(&th.Title, hdr))

	rows := max((m.h-len(lines)-1)/2, 1)
	if m.sel < m.top {
		m.top = m.sel
	}
	if m.sel >= m.top+rows {
		m.top = m.sel - rows + 1
	}
	m.top = max(0, min(m.top, n-rows))
	for i := m.top; i < min(n, m.top+rows); i++ {
		lines = append(lines, m.rankLines(i, barW, scale, styled)...)
	}
	for len(lines) < m.h-1 {
		lines = append(lines, "")
	}
	hint := "↑/↓ select · enter open rank · ? help · q quit"
	if m.note != "" {
		hint = m.note
	}
	lines = append(lines[:m.h-1], styled(&th.Hint, hint))
	return lines
}

func (m *Model) imbalanceLine() string {
	var figs []ranks.Figures
	for i, f := range m.figs {
		if m.have[i] {
			figs = append(figs, f)
		}
	}
	if len(figs) < 2 {
		return "peak max/min: waiting for two ranks' data"
	}
	var parts []string
	for _, im := range ranks.Compare(figs) {
		name := strings.TrimSuffix(strings.TrimPrefix(im.Figure, "peak_"), "_bytes")
		ratio := "∞"
		if im.Ratio > 0 {
			ratio = fmt.Sprintf("%.2f×", im.Ratio)
		}
		if name == "reserved" {
			ratio += fmt.Sprintf(" (rank %d / rank %d)", im.MaxRank, im.MinRank)
		}
		parts = append(parts, name+" "+ratio)
	}
	return "peak max/min: " + strings.Join(parts, " · ")
}

// rankLines draws one rank: its now and peak bars.
func (m *Model) rankLines(i, barW int, scale int64, styled func(*lipgloss.Style, string) string) []string {
	th := m.th
	r, f := m.o.Ranks[i], m.figs[i]
	mark := "  "
	if i == m.sel {
		mark = th.G.Selected + " "
	}
	dev := "-"
	if f.Device >= 0 {
		dev = fmt.Sprint(f.Device)
	}
	first := fmt.Sprintf("%s%-5d%-4s", mark, r.Rank, dev)
	second := fmt.Sprintf("  %-9s", "")
	switch {
	case !m.loaded[i]:
		if pm := m.permille[i].Load(); pm > 0 {
			return []string{first + fmt.Sprintf("loading %d %% · %s", pm/10, r.Name), second}
		}
		return []string{first + "loading " + r.Name, second}
	case m.errs[i] != nil:
		return []string{first + styled(&th.Warn, "error: "+m.errs[i].Error()), second}
	case !m.have[i]:
		return []string{first + "no data yet · " + r.Name, second}
	}
	num := func(v int64) string { return fmt.Sprintf("%*s", colNum, bytesize.Format(v)) }
	oom := fmt.Sprintf("%*s", colOOM, "-")
	if f.OOMs > 0 {
		oom = styled(&th.Warn, fmt.Sprintf("%*s", colOOM, fmt.Sprintf("%c %d", th.G.OOM, f.OOMs)))
	}
	at := fmt.Sprintf("%*s", colTime, m.timeOf(f))
	now := first + "now  " + m.bar(barW, scale, f.AllocatedBytes, f.ActiveBytes, f.ReservedBytes) + " " +
		num(f.AllocatedBytes) + num(f.ActiveBytes) + num(f.ReservedBytes) + oom
	peak := second + "peak " + m.bar(barW, scale, f.PeakRequestedBytes, f.PeakActiveBytes, f.PeakReservedBytes) + " " +
		num(f.PeakRequestedBytes) + num(f.PeakActiveBytes) + num(f.PeakReservedBytes) + fmt.Sprintf("%*s", colOOM, "") + at
	if i == m.sel {
		now = styled(&th.Key, now)
	}
	return []string{now, peak}
}

// bar draws allocated ≤ active ≤ reserved on a scale of w cells.
func (m *Model) bar(w int, scale, alloc, active, reserved int64) string {
	th := m.th
	cells := func(v int64) int {
		if scale <= 0 || v <= 0 {
			return 0
		}
		return int(min((v*int64(w)+scale/2)/scale, int64(w)))
	}
	a, ac, rs := cells(alloc), cells(active), cells(reserved)
	ac, rs = max(ac, a), max(rs, ac, a)
	var b strings.Builder
	th.Wrap(&b, &th.AllocArea, strings.Repeat(string(th.G.AllocArea), a))
	th.Wrap(&b, &th.Active, strings.Repeat(string(th.G.Active), ac-a))
	th.Wrap(&b, &th.Reserved, strings.Repeat(string(th.G.Reserved), rs-ac))
	b.WriteString(strings.Repeat(" ", w-rs))
	return b.String()
}

// timeOf formats the time of a rank's active peak.
func (m *Model) timeOf(f ranks.Figures) string {
	if f.TimeBase == store.TimeSequence {
		return fmt.Sprintf("entry %d", f.PeakActiveTime)
	}
	if f.PeakActiveTime <= 0 {
		return "-"
	}
	return time.UnixMicro(f.PeakActiveTime).In(m.o.Location).Format("15:04:05.000")
}

// progressPermille is how far a load is, in thousandths (0 when unknown).
func progressPermille(p store.LoadProgress) int32 {
	f, _ := p.Fraction()
	return int32(f * 1000)
}
