package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/explain"
)

// layersSnapshot: five layers' allocations whose call sites differ only at
// the end of their names, "Block.forward (layers.N)" at one model.py:88
// (the demo's shape), then five more of them after a step.
func layersSnapshot() *snapshot.Snapshot {
	st := snapshot.NewStackTable()
	const seg = uint64(0x7f0000000000)
	ents := []snapshot.TraceEntry{{Action: snapshot.ActionSegmentAlloc, Addr: seg, Size: 64 * mib}}
	for round := range 2 {
		for layer := range 5 {
			stk := st.Intern([]snapshot.Frame{
				{Filename: "/workspace/llm/model.py", Line: 88, Name: fmt.Sprintf("Block.forward (layers.%d)", layer)},
				{Filename: "/workspace/llm/model.py", Line: 131, Name: "Transformer.forward"},
			})
			ents = append(ents, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: seg + uint64(round*5+layer)*4*mib,
				Size: int64(layer+1) * mib, Frames: stk})
		}
	}
	for i := range ents {
		ents[i].TimeUS = t0 + int64(i)*tStep
	}
	return &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{ents}, Stacks: st.Stacks()}
}

// TestLayerGroupsStayDistinct: at 80 columns the five groups of
// layersSnapshot read differently in the holders view, the change from a
// mark (narrower: six number columns, 20 cells for the group) — each keeps
// its layer, none reads "Block… (model.py:88)" five times.
func TestLayerGroupsStayDistinct(t *testing.T) {
	layer := regexp.MustCompile(`\.(\d)\)`)
	groups := func(t *testing.T, v string) {
		t.Helper()
		seen := map[string]bool{}
		for _, l := range strings.Split(v, "\n") {
			if !strings.Contains(l, "model.py:88") {
				continue
			}
			m := layer.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("a group row without its layer: %q", l)
				continue
			}
			seen[m[1]] = true
		}
		if len(seen) != 5 {
			t.Errorf("%d distinct layers shown, want 5:\n%s", len(seen), v)
		}
	}
	m := newSized(t, testOptions(storeOf(t, layersSnapshot(), nil)), 80, 24)
	press(m, "G", "h")
	v := m.View()
	checkFrame(t, v, 80, 24)
	groups(t, v)
	// the change from the first round to the second
	press(m, "esc", "g")
	for range 6 {
		press(m, "right")
	}
	press(m, "m", "G", "h")
	if v = m.View(); !strings.Contains(v, "change from mark A") {
		t.Fatalf("no diff:\n%s", v)
	}
	checkFrame(t, v, 80, 24)
	groups(t, v)
}

// TestTruncDistinctKeepsWhatDiffers: the helper every view uses, at widths
// from roomy to tight, in cells (a CJK rune is two).
func TestTruncDistinctKeepsWhatDiffers(t *testing.T) {
	var names []string
	for i := range 5 {
		names = append(names, fmt.Sprintf("Block.forward (layers.%d)", i))
	}
	ns := explain.NewNames(names)
	for _, n := range []int{24, 17, 12, 9, 6} {
		seen := map[string]bool{}
		for i, s := range names {
			got := ns.Trunc(s, n)
			if explain.Width(got) > n {
				t.Errorf("%q in %d cells: %q is %d wide", s, n, got, explain.Width(got))
			}
			if !strings.Contains(got, fmt.Sprint(i)) {
				t.Errorf("%q in %d cells: %q lost its layer", s, n, got)
			}
			if got != explain.TruncDistinct(s, n, names) {
				t.Errorf("%q in %d cells: Names.Trunc %q, TruncDistinct %q", s, n, got, explain.TruncDistinct(s, n, names))
			}
			seen[got] = true
		}
		if len(seen) != len(names) {
			t.Errorf("%d cells: only %d distinct names %v", n, len(seen), seen)
		}
	}
	for _, c := range []struct {
		s      string
		n      int
		others []string
		want   string
	}{
		{"Block.forward (layers.0)", 17, []string{"Block.forward (layers.1)"}, "Block.f…layers.0)"},
		{"Block.forward (layers.0)", 6, []string{"Block.forward (layers.1)"}, "…rs.0)"},
		{"alpha_one_long_name", 8, []string{"beta_one_long_name"}, "alpha_o…"}, // the start tells: cut at the right
		{"net.encoder.block3.attention.qkv", 12, []string{"net.encoder.block4.attention.qkv"}, "…block3.att…"},
		{"模型.层.0", 6, []string{"模型.层.1"}, "…层.0"}, // 2 cells a CJK rune
		{"x", 1, nil, "x"},
		{"xy", 1, nil, "…"},
	} {
		if got := explain.TruncDistinct(c.s, c.n, c.others); got != c.want || explain.Width(got) > c.n {
			t.Errorf("TruncDistinct(%q, %d) = %q (%d cells), want %q", c.s, c.n, got, explain.Width(got), c.want)
		}
	}
}
