package tui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/explain"
	"github.com/npumon/npumon/replay/whatif"
	"github.com/npumon/npumon/replay/whatif/sim"
	tuiwhatif "github.com/npumon/npumon/tui/whatif"
)

// TestWhatIfKey opens the what-if view with w on the fragmentation trace
// of replay/whatif, reads the comparison and closes it again with esc.
func TestWhatIfKey(t *testing.T) {
	c, err := replay.DecodeFile("../replay/whatif/sim/testdata/fragmentation.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	if err := st.IngestSnapshot(c.Snapshot); err != nil {
		t.Fatal(err)
	}
	o := testOptions(st)
	o.WhatIf, o.Simulate = func() *replay.Capture { return c }, sim.Simulate
	o.WhatIfConfs = []string{"expandable_segments:True"}
	m := newSized(t, o, 80, 24)
	m.refreshData()

	cmd := press(m, "w")
	if cmd == nil || !m.vw.wi.open {
		t.Fatal("w did not start the what-if view")
	}
	msg := cmd()
	if _, ok := msg.(tuiwhatif.ResultMsg); !ok {
		t.Fatalf("w's command returned %T", msg)
	}
	m.Update(msg)
	v := m.View()
	checkFrame(t, v, 80, 24)
	for _, want := range []string{"What-if", "expandable_segments:True", "entry 110 (200.00 MiB)", "none (recorded OOM fits)"} {
		if !strings.Contains(v, want) {
			t.Errorf("what-if screen lacks %q:\n%s", want, v)
		}
	}
	if cmd := press(m, "esc"); cmd != nil {
		m.Update(cmd())
	}
	if m.vw.wi.open || strings.Contains(m.View(), "What-if") {
		t.Errorf("esc did not close the view:\n%s", m.View())
	}

	// Without a snapshot (live sources, directories) there is no w.
	o.WhatIf = nil
	m = newSized(t, o, 80, 24)
	m.refreshData()
	if cmd := press(m, "w"); cmd != nil || m.vw.wi.open {
		t.Error("w opened the what-if view without a snapshot")
	}
}

// TestWhatIfTimeAxis: on a file with times, the what-if chart's axis is
// written like the main timeline's (clock labels; offsets after r), not in
// seconds of its own.
func TestWhatIfTimeAxis(t *testing.T) {
	c, err := replay.DecodeFile(fixturePath(t), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := fixtureOptions(fixtureSource(t))
	o.WhatIf, o.Simulate = func() *replay.Capture { return c }, sim.Simulate
	o.WhatIfConfs = []string{"expandable_segments:True"}
	m := newSized(t, o, 160, 48)
	for i, tc := range []struct {
		keys      []string
		want, not string
	}{
		{nil, "34:01.1", "0.1s"},
		{[]string{"r"}, "+0µs        +19.46ms", "34:01.1"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			press(m, tc.keys...)
			cmd := press(m, "w")
			m.Update(cmd())
			v := m.View()
			if !strings.Contains(v, "What-if") || !strings.Contains(v, tc.want) || strings.Contains(v, tc.not) {
				t.Errorf("keys %v: axis lacks %q or has %q:\n%s", tc.keys, tc.want, tc.not, v)
			}
			m.Update(press(m, "esc")())
		})
	}
}

// TestWhatIfSameAlternativesAsExplain: w tries the set explain tries
// (whatif.Alternatives), and the view prints the baseline's trust in the
// words of whatif and explain: on leak_steps.pickle the simulation does
// not reproduce the run and no alternative is a fix.
func TestWhatIfSameAlternativesAsExplain(t *testing.T) {
	for _, file := range []string{"../replay/testdata/leak_steps.pickle", "../replay/whatif/sim/testdata/fragmentation.pickle", "../replay/whatif/sim/testdata/deferred.pickle"} {
		c, err := replay.DecodeFile(file, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var tuiOpts, explainOpts whatif.Options
		record := func(into *whatif.Options) whatif.Simulator {
			return func(ctx context.Context, c *replay.Capture, opts whatif.Options) (*whatif.Result, error) {
				*into = opts
				return sim.Simulate(ctx, c, opts)
			}
		}
		e, err := explain.Explain(context.Background(), c, explain.Options{WhatIf: true, Simulate: record(&explainOpts)})
		if err != nil {
			t.Fatal(err)
		}
		st := store.New(store.Options{})
		if err := st.IngestSnapshot(c.Snapshot); err != nil {
			t.Fatal(err)
		}
		o := testOptions(st)
		o.WhatIf, o.Simulate = func() *replay.Capture { return c }, record(&tuiOpts)
		m := newSized(t, o, 100, 30)
		m.refreshData()
		cmd := press(m, "w")
		if cmd == nil {
			t.Fatal("w did not start the what-if view")
		}
		m.Update(cmd())
		want := whatif.Alternatives(c.Snapshot, nil)
		if !slices.Equal(tuiOpts.Confs, want) || !slices.Equal(explainOpts.Confs, want) {
			t.Errorf("%s: TUI tries %v, explain %v, want %v", file, tuiOpts.Confs, explainOpts.Confs, want)
		}
		v := m.View()
		checkFrame(t, v, 100, 30)
		tr := e.Devices[0].WhatIfTrust
		if tr == nil {
			t.Fatalf("%s: explain has no what-if trust", file)
		}
		words := strings.Fields(tr.Text())[:6] // the sentence's start, as explain prints it
		if !strings.Contains(strings.Join(strings.Fields(v), " "), strings.Join(words, " ")) {
			t.Errorf("%s: the view lacks %q:\n%s", file, strings.Join(words, " "), v)
		}
		if !tr.Reproduces && (!strings.Contains(v, "not a fix") || strings.Contains(v, "none (recorded OOM fits)")) {
			t.Errorf("%s: an alternative reads as a fix:\n%s", file, v)
		}
	}
}
