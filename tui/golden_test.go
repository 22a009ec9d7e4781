package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/npumon/npumon/internal/testutil/golden"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif/sim"
)

// TestGolden runs the whole app in teatest at the two reference sizes, drives
// it with keys and compares the final screen with testdata/TestGolden/*.golden
// (refresh with go test ./tui -run TestGolden -update).
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  func(testing.TB) Source
		w, h int
		keys []tea.KeyMsg
		wait string
		opts func(testing.TB, *Options) // adjusts the options (nil: none)
	}{
		{"80x24_segments_block", fixtureScreen, 80, 24,
			[]tea.KeyMsg{keyMsg("2"), keyMsg("down"), keyMsg("down"), keyMsg("down"), keyMsg("enter")}, "allocated before", nil},
		{"80x24_ascii_events", fixtureScreen, 80, 24, []tea.KeyMsg{keyMsg("3"), keyMsg("g"), keyMsg("right")}, "> 02:34:01.085", nil},
		{"160x48_main", fixtureScreen, 160, 48, []tea.KeyMsg{keyMsg("left"), keyMsg("left")}, "entry #5160/5163", nil},
		{"160x48_help", fixtureScreen, 160, 48, []tea.KeyMsg{keyMsg("?")}, "npumon keys", nil},
		{"80x24_holders", fixtureScreen, 80, 24, []tea.KeyMsg{keyMsg("p"), keyMsg("h")}, "Holders by", nil},
		{"160x48_holders", fixtureScreen, 160, 48, []tea.KeyMsg{keyMsg("p"), keyMsg("h"), keyMsg("down")}, "Holders by", nil},
		{"80x24_block_stack", fixtureScreen, 80, 24,
			[]tea.KeyMsg{keyMsg("p"), keyMsg("2"), keyMsg("enter"), keyMsg("v")}, "model.py:54", nil},
		{"160x48_block_stack", fixtureScreen, 160, 48,
			[]tea.KeyMsg{keyMsg("p"), keyMsg("2"), keyMsg("enter"), keyMsg("v")}, "model.py:54", nil},
		{"80x24_oom_panel", smallWithOps, 80, 24, []tea.KeyMsg{keyMsg("g"), keyMsg("o")}, "top holders", nil},
		{"160x48_oom_panel", smallWithOps, 160, 48, []tea.KeyMsg{keyMsg("g"), keyMsg("o")}, "top holders", nil},
		{"160x48_ops_selected", smallWithOps, 160, 48,
			[]tea.KeyMsg{keyMsg("4"), keyMsg("down"), keyMsg("down"), keyMsg("enter")}, "op aten::matmul", nil},
		{"80x24_help", fixtureScreen, 80, 24, []tea.KeyMsg{keyMsg("?")}, "npumon keys", nil},
		{"80x24_whatif", fixtureScreen, 80, 24, []tea.KeyMsg{keyMsg("w")}, "baseline fidelity", withWhatIf},
		{"160x48_whatif", fixtureScreen, 160, 48, []tea.KeyMsg{keyMsg("w"), keyMsg("down")}, "baseline fidelity", withWhatIf},
		{"80x24_live", smallWithOps, 80, 24, nil, "connected", asLive},
		{"160x48_live", smallWithOps, 160, 48, nil, "connected", asLive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := fixtureOptions(tc.src(t))
			if tc.src == nil || strings.Contains(tc.name, "ops") || strings.Contains(tc.name, "live") || strings.Contains(tc.name, "oom") {
				o.SourceName = "small.pickle"
			}
			if tc.opts != nil {
				tc.opts(t, &o)
			}
			o.ASCII = strings.Contains(tc.name, "ascii")
			tm := teatest.NewTestModel(t, New(o), teatest.WithInitialTermSize(tc.w, tc.h))
			// WaitFor consumes what it reads: without keys the first frame
			// may be the last one drawn, so it must hold the wait text too.
			first := func(b []byte) bool {
				return bytes.Contains(b, []byte("Timeline")) && (len(tc.keys) > 0 || bytes.Contains(b, []byte(tc.wait)))
			}
			teatest.WaitFor(t, tm.Output(), first, teatest.WithDuration(time.Minute))
			if len(tc.keys) > 0 {
				for _, k := range tc.keys {
					tm.Send(k)
				}
				teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(tc.wait)) },
					teatest.WithDuration(time.Minute))
			}
			tm.Send(keyMsg("q"))
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute))
			v := fm.View()
			checkFrame(t, v, tc.w, tc.h)
			golden.Check(t, golden.Path(t), []byte(v))
		})
	}
}

// withWhatIf gives the what-if view the fixture's capture and two alternatives.
func withWhatIf(t testing.TB, o *Options) {
	c, err := replay.DecodeFile(fixturePath(t), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o.WhatIf, o.Simulate = func() *replay.Capture { return c }, sim.Simulate
	o.WhatIfConfs = []string{"expandable_segments:True", "max_split_size_mb:128"}
}

// asLive shows the source as a live, connected producer.
func asLive(_ testing.TB, o *Options) {
	o.Live, o.SourceName = true, "pid 4242 @ unix:/run/user/0/npumon/4242.sock"
	o.ConnState = func() (wire.ConnState, string) { return wire.ConnConnected, "" }
}

func smallWithOps(t testing.TB) Source { return storeOf(t, smallSnapshot(true), smallOps()) }

// fixtureScreen is fixtureSource as the golden table's Source.
func fixtureScreen(t testing.TB) Source { return fixtureSource(t) }
