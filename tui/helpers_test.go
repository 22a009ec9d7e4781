package tui

import (
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Setenv("TZ", "UTC")
	os.Exit(m.Run())
}

const (
	mib   = 1 << 20
	segA  = uint64(0x7f0000000000)
	segB  = uint64(0x7f0002000000)
	t0    = int64(1764400000000000) // 2025-11-29 07:06:40 UTC
	tStep = int64(1000)
)

// smallSnapshot is a hand-made, self-consistent capture: two segments, an
// alloc/free cycle, an OOM. Entry i happens at t0 + i ms.
func smallSnapshot(timed bool) *snapshot.Snapshot {
	st := snapshot.NewStackTable()
	stk := st.Intern([]snapshot.Frame{
		{Filename: "train.py", Line: 42, Name: "forward"},
		{Filename: "Python/ceval.c", Line: 1, Name: "PyEval_EvalFrame"},
		{Filename: "train.py", Line: 7, Name: "main"},
	})
	ents := []snapshot.TraceEntry{
		{Action: snapshot.ActionSegmentAlloc, Addr: segA, Size: 20 * mib},
		{Action: snapshot.ActionAlloc, Addr: segA, Size: 8 * mib, Frames: stk},
		{Action: snapshot.ActionAlloc, Addr: segA + 8*mib, Size: 4 * mib, Frames: stk},
		{Action: snapshot.ActionSegmentAlloc, Addr: segB, Size: 2 * mib},
		{Action: snapshot.ActionAlloc, Addr: segB, Size: mib / 2},
		{Action: snapshot.ActionFreeRequested, Addr: segA, Size: 8 * mib},
		{Action: snapshot.ActionFreeCompleted, Addr: segA, Size: 8 * mib},
		{Action: snapshot.ActionOOM, Size: 64 * mib, DeviceFree: mib},
		{Action: snapshot.ActionAlloc, Addr: segA + 12*mib, Size: 6 * mib, Frames: stk},
	}
	for i := range ents {
		if timed {
			ents[i].TimeUS = t0 + int64(i)*tStep
		}
	}
	return &snapshot.Snapshot{
		Segments: []snapshot.Segment{
			{Device: 0, Address: segA, TotalSize: 20 * mib, AllocatedSize: 10 * mib, ActiveSize: 10 * mib, RequestedSize: 10*mib - 1000, IsLarge: true,
				Blocks: []snapshot.Block{
					{Address: segA, Size: 8 * mib, State: snapshot.StateInactive},
					{Address: segA + 8*mib, Size: 4 * mib, RequestedSize: 4*mib - 1000, State: snapshot.StateActiveAllocated, Frames: stk},
					{Address: segA + 12*mib, Size: 6 * mib, RequestedSize: 6 * mib, State: snapshot.StateActiveAllocated, Frames: stk},
					{Address: segA + 18*mib, Size: 2 * mib, State: snapshot.StateInactive},
				}},
			{Device: 0, Address: segB, TotalSize: 2 * mib, AllocatedSize: mib / 2, ActiveSize: mib / 2, RequestedSize: mib / 2,
				Blocks: []snapshot.Block{
					{Address: segB, Size: mib / 2, RequestedSize: mib / 2, State: snapshot.StateActiveAllocated},
					{Address: segB + mib/2, Size: 3 * mib / 2, State: snapshot.StateInactive},
				}},
		},
		DeviceTraces: [][]snapshot.TraceEntry{ents},
		Stacks:       st.Stacks(),
	}
}

func smallOps() []store.Op {
	return []store.Op{
		{Name: "ProfilerStep#1", StartUS: t0, EndUS: t0 + 9*tStep, IsStep: true, Step: 1, Seq: -1},
		{Name: "aten::empty", StartUS: t0 + 500, EndUS: t0 + 2500, Thread: 7, MemDelta: 12 * mib, Step: 1, Seq: 1},
		{Name: "aten::matmul", StartUS: t0 + 7500, EndUS: t0 + 8600, Thread: 7, MemDelta: 6 * mib, Step: 1, Seq: 2},
	}
}

var fixedNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// clock is a manual clock for playback tests.
type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func testOptions(src Source) Options {
	c := &clock{t: fixedNow}
	return Options{Source: src, SourceName: "small.pickle", Now: c.Now, Location: time.UTC, Device: 0}
}

// newSized builds a model, runs Init's synchronous part and sizes it.
func newSized(t testing.TB, o Options, w, h int) *Model {
	t.Helper()
	m := New(o)
	m.Init()
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m
}

func keyMsg(s string) tea.KeyMsg {
	switch s {
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "shift+left":
		return tea.KeyMsg{Type: tea.KeyShiftLeft}
	case "shift+right":
		return tea.KeyMsg{Type: tea.KeyShiftRight}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case "home":
		return tea.KeyMsg{Type: tea.KeyHome}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func press(m *Model, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		_, cmd = m.Update(keyMsg(k))
	}
	return cmd
}

func typeText(m *Model, s string) {
	for _, r := range s {
		m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

// checkFrame asserts the frame is exactly w×h cells.
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

// fixturePath is the real capture the golden screens draw: a torch 2026
// snapshot with time_us, 216 segments and 5163 entries.
func fixturePath(t testing.TB) string {
	return fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
}

// fixtureSource decodes the fixture with replay and indexes it in a real
// store.Store, as `npumon replay` does.
func fixtureSource(t testing.TB) *store.Store {
	t.Helper()
	c, err := replay.DecodeFile(fixturePath(t), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return storeOf(t, c.Snapshot, nil)
}

func fixtureOptions(src Source) Options {
	o := testOptions(src)
	o.SourceName = "cuda-2026-assignment2-memory_snapshot.pickle"
	return o
}
