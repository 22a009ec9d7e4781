package tui

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/frames"
)

// TestNativeStacksAt80x24: on the CUDA training dump, whose backward
// allocations have C++ stacks only, the holders name autograd nodes, v
// shows a stack's user frames on one 80×24 screen with the native runs
// folded, and x unfolds them.
func TestNativeStacksAt80x24(t *testing.T) {
	c, err := replay.DecodeFile(fixture.Path(t, "snapshots/cuda-silmont-mem_snapshot.pickle"), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := storeOf(t, c.Snapshot, nil)
	o := testOptions(st)
	o.SourceName = "cuda-silmont-mem_snapshot.pickle"
	m := newSized(t, o, 80, 24)
	press(m, "o")
	if v := m.View(); !strings.Contains(v, "no OOM in this source") {
		t.Errorf("o on a file without an oom entry:\n%s", v)
	}
	press(m, "p", "h")
	v := m.View()
	checkFrame(t, v, 80, 24)
	if !strings.Contains(v, "DivBackward0 (backward)") || !strings.Contains(v, "BmmBackward0 (backward)") {
		t.Errorf("holders do not name the autograd nodes:\n%s", v)
	}
	for _, bad := range []string{"execute_native", "thread48.o", "unwind"} {
		if strings.Contains(v, bad) {
			t.Errorf("holders name %q:\n%s", bad, v)
		}
	}
	press(m, "v")
	v = m.View()
	checkFrame(t, v, 80, 24)
	if !strings.Contains(v, "… 23 native frames") || !strings.Contains(v, "DivBackward0::apply") || strings.Contains(v, "unwind") {
		t.Errorf("folded stack of the node's allocation:\n%s", v)
	}
	press(m, "x")
	if v = m.View(); !strings.Contains(v, "torch::unwind::unwind") {
		t.Errorf("x does not unfold:\n%s", v)
	}
	press(m, "x")
	if v = m.View(); strings.Contains(v, "torch::unwind::unwind") {
		t.Errorf("x again does not fold:\n%s", v)
	}

	// Every group whose stack has user frames: all of them on one screen.
	r := &frames.Rules{}
	press(m, "esc")
	checked := 0
	for row := range m.vw.x.groups {
		g := &m.vw.x.groups[row]
		stack := st.Stack(g.Allocs[0].Frames)
		var users []string
		for _, f := range stack {
			if r.Class(f) == frames.User {
				users = append(users, f.Name)
			}
		}
		m.vw.x.top().sel = row
		press(m, "v")
		v = m.View()
		checkFrame(t, v, 80, 24)
		if len(users) > 0 {
			checked++
		}
		for _, u := range users {
			if !strings.Contains(v, u) {
				t.Errorf("group %q: user frame %q not on the 80×24 screen:\n%s", g.Key, u, v)
			}
		}
		press(m, "esc")
	}
	if checked < 3 {
		t.Errorf("only %d groups with user frames checked", checked)
	}
}
