package rankview

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/muesli/termenv"

	"github.com/npumon/npumon/internal/testutil/golden"
	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/tui"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// jobDir is the three-rank job of monitor/ranks/jobdir/testdata (gen_ranks.py):
// peak reserved 20 / 40 / 30 MiB, peak active 10 / 30 / 15 MiB, rank 1
// with an OOM.
const jobDir = "../../monitor/ranks/jobdir/testdata/job"

func jobOptions(t testing.TB) Options {
	t.Helper()
	ms, err := jobdir.Find(jobDir)
	if err != nil || len(ms) != 3 {
		t.Fatalf("Find: %v %v", ms, err)
	}
	var rs []Rank
	for _, m := range ms {
		st := store.New(store.Options{})
		path := m.Path
		rs = append(rs, Rank{Rank: m.Rank, Name: m.Path[strings.LastIndexByte(m.Path, '/')+1:], Store: st,
			Load: func(ctx context.Context, report func(store.LoadProgress)) error {
				_, err := watch.Load(ctx, path, st, watch.LoadOptions{Report: report})
				return err
			}})
	}
	return Options{Title: "job", Ranks: rs, Location: time.UTC, Tick: 20 * time.Millisecond, Open: openTUI}
}

// openTUI opens a rank in the usual terminal UI, as cmd/npumon wires it.
func openTUI(s OpenSpec) Child {
	return tui.New(tui.Options{Source: s.Rank.Store, SourceName: s.Title, Live: s.Live, ASCII: s.ASCII, NoColor: s.NoColor,
		Renderer: s.Renderer, Location: s.Location, Device: s.Device, Back: s.Back})
}

func key(s string) tea.KeyMsg {
	switch s {
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// loaded builds the overview and runs its loaders to the end, as the
// program would.
func loaded(t *testing.T, o Options, w, h int) *Model {
	t.Helper()
	m := New(o)
	m.Init()
	for i, r := range o.Ranks {
		if err := r.Load(context.Background(), func(store.LoadProgress) {}); err != nil {
			t.Fatal(err)
		}
		m.Update(loadedMsg{i: i})
	}
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func checkFrame(t *testing.T, v string, w, h int) {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Fatalf("frame has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := lipgloss.Width(l); n != w {
			t.Fatalf("line %d is %d wide, want %d: %q", i, n, w, l)
		}
	}
}

// TestOverviewFigures: the figures and the imbalance line come from each
// rank's Store as gen_ranks.py works them out.
func TestOverviewFigures(t *testing.T) {
	m := loaded(t, jobOptions(t), 80, 24)
	figs := m.Figures()
	const MiB = 1 << 20
	for i, want := range []int64{20 * MiB, 40 * MiB, 30 * MiB} {
		if figs[i].PeakReservedBytes != want || figs[i].Rank != i {
			t.Errorf("rank %d: %+v", i, figs[i])
		}
	}
	v := m.View()
	checkFrame(t, v, 80, 24)
	for _, want := range []string{"3 ranks", "peak max/min: reserved 2.00× (rank 1 / rank 0)", "requested 3.00×",
		"one scale: 0 … 40.0 MiB", "✗ 1", "22:13:20.001"} {
		if !strings.Contains(v, want) {
			t.Errorf("overview lacks %q:\n%s", want, v)
		}
	}
	if strings.Count(v, "✗") != 1 {
		t.Errorf("one OOM flag expected:\n%s", v)
	}
}

// TestOverviewEnterEsc: enter opens the selected rank in the usual view,
// esc in that view comes back to the overview with the selection kept.
func TestOverviewEnterEsc(t *testing.T) {
	m := loaded(t, jobOptions(t), 100, 30)
	m.Update(key("down"))
	m.Update(key("down"))
	m.Update(key("down")) // stops at the last rank
	if m.Selected() != 2 {
		t.Fatalf("selected %d", m.Selected())
	}
	m.Update(key("up"))
	_, cmd := m.Update(key("enter"))
	if !m.InRank() || cmd == nil {
		t.Fatal("enter opened no rank view")
	}
	if v := m.View(); !strings.Contains(v, "rank 1 · …_step10.pickle") {
		t.Fatalf("rank view:\n%s", v)
	}
	// esc: the rank view has nothing to step back from, so it hands back
	_, cmd = m.Update(key("esc"))
	if cmd == nil {
		t.Fatal("esc returned no command")
	}
	m.Update(cmd())
	if m.InRank() || m.Selected() != 1 {
		t.Fatalf("after esc: in rank %v, selected %d", m.InRank(), m.Selected())
	}
	if v := m.View(); !strings.Contains(v, "peak max/min") {
		t.Fatalf("overview not back:\n%s", v)
	}
	// a message of the closed view never reaches a later one
	m.Update(key("enter"))
	if _, c := m.Update(childMsg{gen: -1, msg: tea.QuitMsg{}}); c != nil {
		t.Fatal("stale child message acted on")
	}
}

func TestOverviewHelpQuit(t *testing.T) {
	m := loaded(t, jobOptions(t), 80, 24)
	m.Update(key("?"))
	if v := m.View(); !strings.Contains(v, "npumon ranks overview · keys") {
		t.Fatalf("help:\n%s", v)
	}
	m.Update(key("esc"))
	if v := m.View(); strings.Contains(v, "npumon ranks overview · keys") {
		t.Fatal("esc left help open")
	}
	if _, cmd := m.Update(key("q")); cmd == nil || cmd() != tea.Quit() {
		t.Fatal("q does not quit")
	}
}

// TestGolden runs the overview in teatest and compares the final screen
// with testdata/TestGolden/*.golden (refresh with -update).
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w, h  int
		ascii bool
		keys  []string
	}{
		{"80x24", 80, 24, false, []string{"down"}},
		{"120x30_ascii", 120, 30, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := jobOptions(t)
			o.ASCII = tc.ascii
			tm := teatest.NewTestModel(t, New(o), teatest.WithInitialTermSize(tc.w, tc.h))
			// every rank loaded: a header drawn after the last "loading"
			// (ranks load one by one; the imbalance line is there from two)
			teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
				last := bytes.LastIndex(b, []byte("loading"))
				return bytes.Contains(b, []byte("peak max/min: reserved")) && bytes.Contains(b[last+1:], []byte("3 ranks"))
			}, teatest.WithDuration(time.Minute))
			// keys are handled in order, q last: the final model has seen them
			for _, k := range tc.keys {
				tm.Send(key(k))
			}
			tm.Send(key("q"))
			fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute))
			v := fm.View()
			checkFrame(t, v, tc.w, tc.h)
			golden.Check(t, golden.Path(t), []byte(v))
		})
	}
}

// Tiny and huge terminals draw a full frame without panicking.
func TestOverviewSizes(t *testing.T) {
	m := loaded(t, jobOptions(t), 80, 24)
	for _, sz := range [][2]int{{1, 1}, {20, 3}, {40, 6}, {300, 80}} {
		m.Update(tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		checkFrame(t, m.View(), sz[0], sz[1])
	}
}

// TestOverviewEnterWhileLoading: enter on a rank still loading says so and
// opens it once its load ends; moving the selection cancels that, and a
// rank whose load failed says it has nothing to open. The loading line
// shows how far the load is.
func TestOverviewEnterWhileLoading(t *testing.T) {
	o := jobOptions(t)
	m := New(o)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	m.permille[0].Store(progressPermille(store.LoadProgress{BytesDone: 1 << 20, BytesTotal: 4 << 20}))
	if v := m.View(); !strings.Contains(v, "loading 25 % · ") {
		t.Fatalf("no progress on the loading line:\n%s", v)
	}
	if _, cmd := m.Update(key("enter")); cmd != nil || m.InRank() {
		t.Fatal("enter opened a rank that is still loading")
	}
	if v := m.View(); !strings.Contains(v, "rank 0 is loading · it opens when loaded") {
		t.Fatalf("no note for the pending open:\n%s", v)
	}
	if err := o.Ranks[0].Load(context.Background(), func(store.LoadProgress) {}); err != nil {
		t.Fatal(err)
	}
	if _, cmd := m.Update(loadedMsg{i: 0}); cmd == nil || !m.InRank() {
		t.Fatal("the pending rank did not open once loaded")
	}
	if v := m.View(); !strings.Contains(v, "rank 0 · ") {
		t.Fatalf("rank view:\n%s", v)
	}

	// a pending open is cancelled when the selection moves
	m = New(o)
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	m.Update(key("down"))
	m.Update(key("enter"))
	m.Update(key("up"))
	if v := m.View(); strings.Contains(v, "it opens when loaded") {
		t.Fatalf("the note stayed after a key:\n%s", v)
	}
	if m.Update(loadedMsg{i: 1}); m.InRank() {
		t.Fatal("a cancelled pending open still opened")
	}

	// a failed load: nothing to open, and the hint says so
	m.Update(loadedMsg{i: 0, err: os.ErrNotExist})
	m.Update(key("enter"))
	if v := m.View(); m.InRank() || !strings.Contains(v, "rank 0 could not be read: nothing to open") {
		t.Fatalf("enter on a failed rank:\n%s", v)
	}
}
