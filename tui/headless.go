package tui

import (
	"context"
	"errors"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/npumon/npumon/internal/crash"
)

// headlessQuitMsg ends a headless run.
type headlessQuitMsg struct{}

// RunHeadless runs the app's data path — loading, polling the Source,
// playback, the cursor queries of a 120×40 screen — without a terminal,
// for d after loading finished, and returns the final model (its Summary
// is the state at the final cursor).
func RunHeadless(ctx context.Context, opts Options, d time.Duration) (*Model, error) {
	m := New(opts)
	m.ld.headless, m.ld.whole = d, true
	p := tea.NewProgram(m, tea.WithInput(nil), tea.WithoutRenderer(), tea.WithOutput(io.Discard),
		tea.WithContext(ctx), tea.WithoutSignalHandler())
	go func() { defer crash.Recover(); p.Send(tea.WindowSizeMsg{Width: 120, Height: 40}) }()
	if opts.Done != nil {
		go func() {
			defer crash.Recover()
			select {
			case <-opts.Done:
				p.Send(headlessQuitMsg{})
			case <-ctx.Done():
			}
		}()
	}
	_, err := p.Run()
	m.Close()
	if m.ld.loadErr != nil {
		return m, m.ld.loadErr
	}
	if err != nil && !(errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil) {
		return m, err
	}
	return m, nil
}

// headlessTimer starts the countdown of a headless run once data is there.
func (m *Model) headlessTimer() tea.Cmd {
	if m.ld.headless <= 0 {
		return nil
	}
	d := m.ld.headless
	m.ld.headless = 0
	m.cur.lastTick = m.o.Now() // playback counts from the end of loading
	return tea.Tick(d, func(time.Time) tea.Msg { return headlessQuitMsg{} })
}
