package tui

import (
	"bytes"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// TestGolden runs the whole app in teatest at the two reference sizes, drives
// it with keys and compares the final screen with testdata/TestGolden/*.golden
// (refresh with go test ./tui -run TestGolden -update).
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		w, h int
		keys []tea.KeyMsg
		wait string
	}{
		{"80x24_segments_block", 80, 24, []tea.KeyMsg{keyMsg("2"), keyMsg("enter"), keyMsg("down")}, "allocated at"},
		{"160x48_main", 160, 48, []tea.KeyMsg{keyMsg("left"), keyMsg("left")}, "07:06:40.006"},
		{"160x48_help", 160, 48, []tea.KeyMsg{keyMsg("?")}, "npumon keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := fixtureSource(t)
			tm := teatest.NewTestModel(t, New(fixtureOptions(src)), teatest.WithInitialTermSize(tc.w, tc.h))
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte("Timeline")) },
				teatest.WithDuration(5*time.Second))
			for _, k := range tc.keys {
				tm.Send(k)
			}
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(tc.wait)) },
				teatest.WithDuration(5*time.Second))
			tm.Send(keyMsg("q"))
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))
			v := fm.View()
			checkFrame(t, v, tc.w, tc.h)
			golden.RequireEqual(t, []byte(v))
		})
	}
}
