package segmap

import (
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

const mib = 1 << 20

func testTheme(ascii bool) *theme.Theme {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	return theme.New(r, ascii, true)
}

// seg is 16 MiB: 4 MiB allocated (3 requested → 1 slack), 4 MiB pending free, 8 MiB free.
func seg(addr uint64) snapshot.Segment {
	return snapshot.Segment{Address: addr, TotalSize: 16 * mib, Blocks: []snapshot.Block{
		{Address: addr, Size: 4 * mib, RequestedSize: 3 * mib, State: snapshot.StateActiveAllocated, Frames: 1},
		{Address: addr + 4*mib, Size: 4 * mib, State: snapshot.StateActivePendingFree},
		{Address: addr + 8*mib, Size: 8 * mib, State: snapshot.StateInactive},
	}}
}

func TestBarToScale(t *testing.T) {
	for _, ascii := range []bool{false, true} {
		m := New(testTheme(ascii))
		s := seg(0x1000000)
		bar, caret := m.bar(&s, 16, false)
		want := "###-%%%%........"
		if !ascii {
			want = "███░▒▒▒▒········"
		}
		if bar != want || caret != "" {
			t.Errorf("ascii=%v: bar %q caret %q, want %q", ascii, bar, caret, want)
		}
	}
}

func TestSelectionAndCaret(t *testing.T) {
	m := New(testTheme(true))
	m.SetState(store.State{Segments: []snapshot.Segment{seg(0x2000000), seg(0x1000000)}})
	if s := m.Segment(); s == nil || s.Address != 0x1000000 {
		t.Fatalf("first selection should be the lowest address, got %+v", s)
	}
	m.Move(1)
	if m.Segment().Address != 0x2000000 {
		t.Fatalf("down did not move")
	}
	m.Move(5) // clamps
	if m.Segment().Address != 0x2000000 {
		t.Fatalf("move past the end should clamp")
	}
	m.Enter()
	m.Move(1)
	if b := m.Block(); b == nil || b.State != snapshot.StateActivePendingFree {
		t.Fatalf("block selection: %+v", b)
	}
	v := m.View(60, 10, nil)
	if !strings.Contains(v, "^^^^") {
		t.Errorf("caret under the selected block missing:\n%s", v)
	}
	// A new state keeps the selection on the same addresses.
	m.SetState(store.State{Segments: []snapshot.Segment{seg(0x1000000), seg(0x2000000), seg(0x3000000)}})
	if m.Segment().Address != 0x2000000 || m.Block() == nil || m.Block().Address != 0x2000000+4*mib {
		t.Fatalf("selection lost across states: seg %x blk %+v", m.Segment().Address, m.Block())
	}
	if !m.Back() || m.InBlocks() || m.Back() {
		t.Fatalf("esc should leave block selection once")
	}
}

func TestViewSizeAndDetail(t *testing.T) {
	m := New(testTheme(false))
	var segs []snapshot.Segment
	for i := 0; i < 40; i++ {
		segs = append(segs, seg(uint64(i+1)*0x1000000))
	}
	m.SetState(store.State{Segments: segs})
	for i := 0; i < 30; i++ {
		m.Move(1)
	}
	stack := func(id snapshot.StackID) snapshot.Stack {
		return snapshot.Stack{{Filename: "a.py", Line: 3, Name: "f"}}
	}
	m.Enter()
	d := m.Detail(stack, "at 12:00:00.000 (entry 3)", 70)
	joined := strings.Join(d, "\n")
	for _, want := range []string{"block 0x1f000000", "requested 3.00 MiB", "active_allocated", "allocated at 12:00:00.000", "f  a.py:3"} {
		if !strings.Contains(joined, want) {
			t.Errorf("detail lacks %q:\n%s", want, joined)
		}
	}
	v := m.View(70, 20, d)
	lines := strings.Split(v, "\n")
	if len(lines) != 20 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		if lipgloss.Width(l) != 70 {
			t.Fatalf("line %d width %d", i, lipgloss.Width(l))
		}
	}
	if !strings.Contains(v, "0x1f000000") {
		t.Errorf("selected segment scrolled out of view:\n%s", v)
	}
}

func TestStackLines(t *testing.T) {
	f := func(file string, line int64, name string) snapshot.Frame {
		return snapshot.Frame{Filename: file, Line: line, Name: name}
	}
	st := snapshot.Stack{
		f("model.py", 10, "forward"),
		f("Python/ceval.c", 1, "_PyEval_EvalFrameDefault"),
		f("torch/csrc/core/boxing/x.h", 1, "call"),
		f("loop.py", 5, "step"), f("loop.py", 5, "step"), f("loop.py", 5, "step"), f("loop.py", 5, "step"),
		f("a.py", 1, "g"), f("a.py", 1, "g"),
	}
	got := strings.Join(StackLines(st, 0), "|")
	want := "forward  model.py:10|step  loop.py:5|<repeats 3 times>|g  a.py:1|g  a.py:1"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// a backward stack: the native runs fold around the autograd node
	bw := snapshot.Stack{
		f("??", 0, "torch::unwind::unwind()"),
		f("CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char)"),
		f("??", 0, "at::detail::empty_cuda(c10::ArrayRef<long>)"),
		f("??", 0, "at::_ops::bmm::call(at::Tensor const&)"),
		f("??", 0, "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)"),
		f("", 0, "torch::autograd::Node::operator()(std::vector<at::Tensor>&&)"),
		f("thread48.o", 0, "execute_native_thread_routine"),
		f("??", 0, "clone"),
	}
	got = strings.Join(StackLines(bw, 0), "|")
	want = "… 3 native frames|torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)  ??:0|… 3 native frames"
	if got != want {
		t.Errorf("backward stack:\n got  %s\nwant %s", got, want)
	}
	// narrow: the path gives way from the left, the file and line stay
	win := snapshot.Stack{f(`D:\Dev\assignment2-systems\cs336-basics\cs336_basics\model.py`, 39, "forward")}
	if got := StackLines(win, 40)[0]; got != `forward  …\cs336_basics\model.py:39` {
		t.Errorf("narrow frame %q", got)
	}
}

func TestSortBySize(t *testing.T) {
	m := New(testTheme(true))
	small := snapshot.Segment{Address: 0x1000, TotalSize: 2 * mib}
	big := seg(0x9000000)
	m.SetState(store.State{Segments: []snapshot.Segment{big, small}})
	if m.Segment().Address != 0x1000 || m.SortName() != "address" {
		t.Fatalf("address order first")
	}
	if m.ToggleSort() != "size" || m.segs[0].Address != 0x9000000 || m.Segment().Address != 0x1000 {
		t.Fatalf("size order: first %x, selection %x", m.segs[0].Address, m.Segment().Address)
	}
	// the selected segment vanishes: the selection falls back without panicking
	m.SetState(store.State{Segments: []snapshot.Segment{big}})
	if m.Segment().Address != 0x9000000 {
		t.Fatalf("fallback selection %x", m.Segment().Address)
	}
	m.SetState(store.State{})
	if m.Segment() != nil || m.Block() != nil {
		t.Fatalf("empty state should have no selection")
	}
	m.Move(1)
	m.Enter()
	_ = m.View(40, 5, nil)
}
