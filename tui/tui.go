package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"

	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/memusage"
	"github.com/npumon/npumon/replay/whatif"
	"github.com/npumon/npumon/tui/ttyin"
)

// Progress reports how far loading has come.
type Progress = store.LoadProgress

// Options configure the app. Only Source is required.
type Options struct {
	// Source is the data; normally a *store.Store, possibly still being fed.
	Source Source
	// SourceName is shown in the header: a file, "pid 1234 @ host:port", a directory.
	SourceName string
	// Live makes the cursor follow the newest data (space pauses, f follows).
	Live bool
	// Load, when set, runs once off the UI goroutine (decode a file into
	// Source). It must honour ctx and may call report from any goroutine.
	// Keys work meanwhile; what Source holds is shown as it grows (a
	// progress line instead of the hints, docs/tui.md "While a file
	// loads"), the loading screen until it holds anything; an error is
	// shown and returned by Run. RunHeadless waits for the whole load.
	Load func(ctx context.Context, report func(Progress)) error
	// ASCII draws with ASCII glyphs only; NoColor drops colour (NO_COLOR in
	// the environment does the same).
	ASCII, NoColor bool
	// Renderer to build styles from (default lipgloss's default renderer).
	Renderer *lipgloss.Renderer
	// Now is the clock for playback (default time.Now).
	Now func() time.Time
	// Location for wall-clock times (default time.Local).
	Location *time.Location
	// Device to show first; a device the source does not have (e.g. -1)
	// falls back to its first device.
	Device int
	// Speed is the initial replay speed (default 1); Play starts playing.
	Speed float64
	Play  bool
	// Relative shows times relative to the first entry instead of wall clock.
	Relative bool
	// Tick is the poll/redraw interval (default 100ms: at most ~10 redraws/s).
	Tick time.Duration
	// Note, when set, is polled for a line the header shows before the
	// figures (e.g. that a source has no block-level trace); "" shows none.
	Note func() string
	// ConnState, when set, is polled every tick for the header (live sources).
	ConnState func() (wire.ConnState, string)
	// Captures, when set, is a watched directory's captures: key c shows
	// the capture picker (arrival order, new ones appearing live, enter
	// opens one) and the header names the open capture after SourceName.
	Captures Captures
	// WhatIf, when set, returns the decoded snapshot for key w, the what-if
	// view (replay/whatif): nil while it is still loading. WhatIfConfs are
	// the alternatives it compares (default whatif.Alternatives, as the
	// whatif and explain commands). Simulate runs it (sim.Simulate, from
	// replay/whatif/sim: the TUI does not link the allocator); without it
	// w says the what-if is not available.
	WhatIf      func() *replay.Capture
	WhatIfConfs []string
	Simulate    whatif.Simulator
	// Done, when set, is closed when a live source has nothing more to send
	// (a demo job that finished): a headless run then ends early, summarising
	// the final data.
	Done <-chan struct{}
	// Devices, when set, feeds the devices view (key D): per NPU chip the
	// memory bar, AICore, power, temperature and health, and the processes
	// holding device memory, as npu-smi reports them.
	Devices DeviceFeed
	// ProducerPID, when set, is the pid of the process whose allocator the
	// Source shows (0 while unknown); the devices view sets its device memory
	// next to the allocator's reserved bytes.
	ProducerPID func() int
	// MemUsage, when set, returns torch_npu's memUsageInfo CSVs paired
	// with the capture shown (replay/memusage): the devices view lists the
	// memory each module held outside the caching allocator, and the oom
	// panel's verdict names it. Called when the devices view refreshes or
	// an oom panel opens; it must return at once (cache what it reads).
	MemUsage func() []*memusage.File
	// DevicesOnly shows the devices view alone (npumon devices --watch);
	// Source may be nil.
	DevicesOnly bool
	// Back, when set, is what esc returns once the view has nothing left
	// to step back from (no selection, filter or zoom): a parent view, such
	// as the ranks overview, takes its message as "come back".
	Back tea.Cmd
}

// New returns the app model. The caller runs it with tea.NewProgram.
func New(opts Options) *Model {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Speed <= 0 {
		opts.Speed = 1
	}
	if opts.Tick <= 0 {
		opts.Tick = 100 * time.Millisecond
	}
	if os.Getenv("NO_COLOR") != "" {
		opts.NoColor = true
	}
	return newModel(opts)
}

// NewProgram returns a program for opts with the alternate screen on.
// Live state reaches the app one way only: it polls every Tick (the
// Source's Version, ConnState, Note, Devices, Captures); nothing is sent
// to the program from outside.
func NewProgram(opts Options, popts ...tea.ProgramOption) *tea.Program {
	popts = append([]tea.ProgramOption{tea.WithAltScreen(), tea.WithMouseCellMotion()}, popts...)
	return tea.NewProgram(New(opts), popts...)
}

// Run runs the app until the user quits or ctx ends. It returns the load
// error, if loading failed.
func Run(ctx context.Context, opts Options, popts ...tea.ProgramOption) error {
	base := []tea.ProgramOption{tea.WithContext(ctx)}
	if term.IsTerminal(os.Stdin.Fd()) {
		// Keys arrive whole even when a slow link splits their escape sequences.
		base = append(base, tea.WithInput(ttyin.New(os.Stdin)))
	}
	p := NewProgram(opts, append(base, popts...)...)
	// Bubble Tea puts the terminal back itself on a normal end, SIGINT,
	// SIGTERM and a panic in its own loop or commands; a panic in another
	// goroutine (crash.Recover) and SIGQUIT / SIGABRT are ours to handle.
	defer crash.OnCrash(terminalRestorer())()
	defer onFatalSignal()()
	final, err := p.Run()
	if errors.Is(err, tea.ErrProgramPanic) {
		err = fmt.Errorf("%w; this is a bug in npumon: please report it, with the text above and the command you ran, to the npumon issue tracker", err)
	}
	if m, ok := final.(*Model); ok {
		m.Close()
		if m.ld.loadErr != nil {
			return m.ld.loadErr
		}
	}
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// terminalRestorer returns what puts the terminal back as it was before
// the program started: the input's mode (cooked, echo) and the output's
// alternate screen, mouse reporting, bracketed paste and cursor.
func terminalRestorer() func() {
	var state *term.State
	if term.IsTerminal(os.Stdin.Fd()) {
		state, _ = term.GetState(os.Stdin.Fd())
	}
	out := term.IsTerminal(os.Stdout.Fd())
	return func() {
		if out {
			// mouse modes off, bracketed paste off, cursor shown, main screen
			os.Stdout.WriteString("\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l\x1b[?25h\x1b[?1049l")
		}
		if state != nil {
			_ = term.Restore(os.Stdin.Fd(), state)
		}
	}
}

// onFatalSignal makes SIGQUIT and SIGABRT restore the terminal, then take
// their default action (Go's goroutine dump and exit 2) as if unhandled.
func onFatalSignal() (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGQUIT, syscall.SIGABRT)
	done := make(chan struct{})
	go func() {
		defer crash.Recover()
		defer crash.Recover()
		select {
		case s := <-sig:
			crash.RunHooks()
			signal.Reset(s)
			_ = syscall.Kill(os.Getpid(), s.(syscall.Signal))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}
