package whatif

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/bubbles/key"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/golden"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
	"github.com/npumon/npumon/replay/whatif/sim"
	"github.com/npumon/npumon/tui/theme"
)

const traces = "../../replay/whatif/sim/testdata/"

func newTheme(ascii bool) *theme.Theme {
	return theme.New(lipgloss.NewRenderer(io.Discard), ascii, true)
}

// loaded returns a view holding the fragmentation trace's what-if result.
func loaded(t *testing.T, file string, ascii bool, confs ...string) Model {
	t.Helper()
	c, err := replay.DecodeFile(traces+file, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(newTheme(ascii))
	cmd := m.Start(context.Background(), sim.Simulate, c, whatif.Options{Confs: confs})
	if !m.Running() {
		t.Error("not running after Start")
	}
	m, _ = m.Update(cmd())
	if m.Err() != nil || m.Result() == nil || m.Running() {
		t.Fatalf("after ResultMsg: err %v, result %v, running %v", m.Err(), m.Result(), m.Running())
	}
	return m
}

func checkSize(t *testing.T, v string, w, h int) []string {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Fatalf("%d×%d: %d lines", w, h, len(lines))
	}
	for i, l := range lines {
		if got := theme.Width(l); got != w {
			t.Errorf("%d×%d: line %d is %d cells: %q", w, h, i, got, l)
		}
	}
	return lines
}

func TestViewSizes(t *testing.T) {
	for _, ascii := range []bool{false, true} {
		m := loaded(t, "fragmentation.pickle", ascii, "expandable_segments:True", "max_split_size_mb:40")
		for _, sz := range [][2]int{{80, 24}, {100, 30}, {160, 48}, {60, 12}, {20, 5}} {
			m.SetSize(sz[0], sz[1])
			checkSize(t, m.View(), sz[0], sz[1])
		}
	}
}

func TestViewContent(t *testing.T) {
	m := loaded(t, "fragmentation.pickle", true, "expandable_segments:True", "max_split_size_mb:40")
	m, _ = m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	v := m.View()
	lines := checkSize(t, v, 80, 24)
	for _, want := range []string{
		"What-if | device 0 | npu allocator | device memory 1024.00 MiB",
		". recorded  X first OOM  [* baseline]  + expandable_segments:True  o max_split",
		"recorded", "entry 110 (200.00 MiB)", "none (recorded OOM fits)",
		"baseline fidelity: reserved curve max |",
		"the baseline reproduces this run: it runs out at the recorded OOM (entry 110)",
		"esc close",
	} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q:\n%s", want, v)
		}
	}
	// The chart shows the recorded area, the runs (expandable_segments
	// follows the baseline exactly, under it) and the device limit.
	chart := strings.Join(lines[2:18], "\n")
	for _, g := range []string{".", "*", "o", "---", " 0+---", "X"} {
		if !strings.Contains(chart, g) {
			t.Errorf("chart lacks %q:\n%s", g, chart)
		}
	}
	golden.Check(t, filepath.Join("testdata", "fragmentation_80x24.txt"), []byte(v))
}

func TestTimeAxis(t *testing.T) {
	m := loaded(t, "deferred.pickle", true)
	m.SetSize(80, 24)
	v := m.View()
	checkSize(t, v, 80, 24)
	if !strings.Contains(v, " 0ms ") || !strings.Contains(v, " 12ms ") || strings.Contains(v, "#1") { // 17 entries 1 ms apart
		t.Errorf("no times on the x axis:\n%s", v)
	}
	m = loaded(t, "max_split.pickle", true)
	m.SetSize(80, 24)
	if v := m.View(); !strings.Contains(v, "#8") {
		t.Errorf("no entry numbers on the x axis:\n%s", v)
	}
}

func TestKeys(t *testing.T) {
	m := loaded(t, "fragmentation.pickle", true, "expandable_segments:True")
	m.SetSize(80, 24)
	key := func(s string) tea.KeyMsg {
		if s == "esc" {
			return tea.KeyMsg{Type: tea.KeyEsc}
		}
		return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
	}
	m, _ = m.Update(key("j"))
	m, _ = m.Update(key("j")) // stays on the last run
	if m.sel != 1 {
		t.Errorf("selection %d after two downs, want 1", m.sel)
	}
	if v := m.View(); !strings.Contains(v, "+ expandable_segments:True") {
		t.Errorf("legend lost the selected run:\n%s", v)
	}
	m, _ = m.Update(key("k"))
	if m.sel != 0 {
		t.Errorf("selection %d after up, want 0", m.sel)
	}
	m, _ = m.Update(key("d")) // one device: stays
	if m.dev != 0 {
		t.Errorf("device index %d", m.dev)
	}
	for _, k := range []string{"esc", "w"} {
		_, cmd := m.Update(key(k))
		if cmd == nil {
			t.Fatalf("%s: no command", k)
		}
		if _, ok := cmd().(CloseMsg); !ok {
			t.Errorf("%s: command does not close", k)
		}
	}
}

// The view matches its Keys: rebinding a key moves the action.
func TestKeysRebound(t *testing.T) {
	m := loaded(t, "fragmentation.pickle", true, "expandable_segments:True")
	m.Keys.Down = key.NewBinding(key.WithKeys("x"))
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	if m.sel != 0 {
		t.Fatalf("j moved the selection after Down was rebound to x")
	}
	m, _ = m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")})
	if m.sel != 1 {
		t.Fatalf("x did not move the selection: %d", m.sel)
	}
	if got := len(DefaultKeyMap().ShortHelp()); got != 4 {
		t.Fatalf("help lists %d bindings", got)
	}
}

func TestStaleResultIgnored(t *testing.T) {
	c, err := replay.DecodeFile(traces+"max_split.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(newTheme(true))
	old := m.Start(context.Background(), sim.Simulate, c, whatif.Options{})
	fresh := m.Start(context.Background(), sim.Simulate, c, whatif.Options{Confs: []string{"max_split_size_mb:100"}})
	m, _ = m.Update(old())
	if m.Result() != nil || !m.Running() {
		t.Fatal("a superseded run's result was shown")
	}
	m, _ = m.Update(fresh())
	if r := m.Result(); r == nil || len(r.Confs) != 1 {
		t.Fatalf("result %+v", r)
	}
}

func TestErrorAndEmptyViews(t *testing.T) {
	c, err := replay.DecodeFile(traces+"max_split.pickle", replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(newTheme(true))
	m.SetSize(80, 24)
	checkSize(t, m.View(), 80, 24)
	cmd := m.Start(context.Background(), sim.Simulate, c, whatif.Options{Confs: []string{"max_split_size_mb:1"}})
	if v := m.View(); !strings.Contains(v, "re-simulating") {
		t.Errorf("running view:\n%s", v)
	}
	m, _ = m.Update(cmd())
	v := m.View()
	checkSize(t, v, 80, 24)
	if m.Err() == nil || !strings.Contains(v, "what-if failed: --conf \"max_split_size_mb:1\"") {
		t.Errorf("error view:\n%s", v)
	}
}

func TestSample(t *testing.T) {
	pts := []whatif.Point{{Index: -1, Bytes: 10}, {Index: 2, Bytes: 50}, {Index: 3, Bytes: 20}, {Index: 9, Bytes: 0}}
	xOf := func(i int) float64 { return float64(i + 1) }
	got := sample(pts, xOf, 10, 5) // columns of 2 entries
	want := []float64{10, 50, 20, 20, 20}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sample = %v, want %v", got, want)
		}
	}
}

func TestWithoutHint(t *testing.T) {
	m := loaded(t, "fragmentation.pickle", true, "expandable_segments:True")
	m.SetHint(false)
	m.SetSize(80, 20)
	lines := checkSize(t, m.View(), 80, 20)
	if !strings.HasPrefix(lines[19], "the baseline reproduces this run") || strings.Contains(m.View(), "esc close") {
		t.Errorf("last row %q; the view still draws its hint", lines[19])
	}
}

// TestNothingToSimulate: a snapshot without allocations shows why there
// is nothing to simulate, in the words of whatif and explain, and no run.
func TestNothingToSimulate(t *testing.T) {
	c, err := replay.DecodeFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(newTheme(true))
	cmd := m.Start(context.Background(), sim.Simulate, c, whatif.Options{Confs: whatif.Alternatives(c.Snapshot, nil)})
	m, _ = m.Update(cmd())
	for _, sz := range [][2]int{{80, 24}, {40, 6}} {
		m.SetSize(sz[0], sz[1])
		v := m.View()
		checkSize(t, v, sz[0], sz[1])
		if !strings.Contains(v, "nothing to simulate") || strings.Contains(v, "fits") || strings.Contains(v, "baseline ") {
			t.Errorf("%v:\n%s", sz, v)
		}
	}
}
