package tui

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/explain"
)

// TestHoldersView: h lists the live allocations at the cursor by call site
// (Python interpreter frames skipped), enter lists a group's allocations,
// v shows the whole stack, b regroups, esc goes back one view at a time.
func TestHoldersView(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 120, 40)
	press(m, "h")
	v := m.View()
	for _, want := range []string{"Holders by callsite", "3 live allocations", "forward (train.py:42)", "(no stack)", "10.0 MiB"} {
		if !strings.Contains(v, want) {
			t.Fatalf("holders view lacks %q:\n%s", want, v)
		}
	}
	checkFrame(t, v, 120, 40)
	press(m, "enter")
	if v = m.View(); !strings.Contains(v, "2 allocations of forward (train.py:42)") || !strings.Contains(v, "0x7f0000c00000") {
		t.Fatalf("allocations of the group:\n%s", v)
	}
	press(m, "v")
	if v = m.View(); !strings.Contains(v, "innermost first") || !strings.Contains(v, "forward  train.py:42") ||
		!strings.Contains(v, "main  train.py:7") {
		t.Fatalf("stack view:\n%s", v)
	}
	press(m, "esc", "esc")
	press(m, "b")
	if v = m.View(); !strings.Contains(v, "Holders by stack") {
		t.Fatalf("b: %s", v)
	}
	press(m, "b")
	if v = m.View(); !strings.Contains(v, "Holders by op") || !strings.Contains(v, "aten::matmul") || !strings.Contains(v, "aten::empty") {
		t.Fatalf("by op:\n%s", v)
	}
	press(m, "b", "b", "b") // stream, size, category
	if v = m.View(); !strings.Contains(v, "Holders by category") || !regexp.MustCompile(`\b(temporary|activation|unknown|parameter)\b`).MatchString(v) {
		t.Fatalf("by category:\n%s", v)
	}
	press(m, "esc")
	if m.vw.x.open() {
		t.Fatal("esc left a view open")
	}
	// the holders follow the cursor
	press(m, "g", "h")
	if v = m.View(); !strings.Contains(v, "0 live allocations") {
		t.Fatalf("holders at the start:\n%s", v)
	}
}

// TestMarkShowsChange: m sets mark A; the holders view then shows the
// change from the mark to the cursor with allocations born and freed.
func TestMarkShowsChange(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 120, 40)
	press(m, "g", "right", "right", "right") // after entry 2: 8 MiB + 4 MiB live
	press(m, "m")
	if !strings.Contains(m.View(), "mark A set") {
		t.Fatalf("no mark note:\n%s", m.View())
	}
	press(m, "G", "h")
	v := m.View()
	for _, want := range []string{"change from mark A", "DELTA", "-2.00 MiB", "2→2", "0→1"} {
		if !strings.Contains(v, want) {
			t.Fatalf("diff lacks %q:\n%s", want, v)
		}
	}
	press(m, "m") // at the cursor, not the mark: moves the mark here
	if v = m.View(); strings.Contains(v, "-2.00 MiB") {
		t.Fatalf("mark not moved:\n%s", v)
	}
	press(m, "m") // again at the mark: cleared
	if v = m.View(); strings.Contains(v, "change from mark A") {
		t.Fatalf("mark not cleared:\n%s", v)
	}
}

// TestOOMPanel: o lands on the next OOM and shows its panel.
func TestOOMPanel(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 120, 40)
	press(m, "g", "o")
	v := m.View()
	for _, want := range []string{"Out of memory at entry #7", "verdict", "shortage", "requested            64.0 MiB",
		"device free          1.00 MiB", "reserved             22.0 MiB", "cached free", "top holders", "forward (train.py:42)"} {
		if !strings.Contains(v, want) {
			t.Fatalf("OOM panel lacks %q:\n%s", want, v)
		}
	}
	if m.Summary().Applied != 8 {
		t.Errorf("cursor after the oom entry: applied %d, want 8", m.Summary().Applied)
	}
	checkFrame(t, v, 120, 40)
	press(m, "v")
	if v = m.View(); !strings.Contains(v, "the failing request") {
		t.Fatalf("stack of the failing request:\n%s", v)
	}
	press(m, "esc", "esc")
	press(m, "G", "o") // past the last OOM (a live view following): the last one
	if v = m.View(); !strings.Contains(v, "Out of memory at entry #7") {
		t.Errorf("o past the last OOM:\n%s", v)
	}
	press(m, "o") // in the panel: there is no next one
	if !strings.Contains(m.View(), "no OOM after the cursor") {
		t.Errorf("o in the last OOM's panel:\n%s", m.View())
	}
	// 80×24 fits
	m = newSized(t, testOptions(smallWithOps(t)), 80, 24)
	press(m, "g", "o")
	checkFrame(t, m.View(), 80, 24)
}

// TestOOMPanelMemUsage: with the capture's memUsageInfo CSV the verdict
// says how much of the device its modules hold.
func TestOOMPanelMemUsage(t *testing.T) {
	o := testOptions(smallWithOps(t))
	o.MemUsage = memFiles(t)
	m := newSized(t, o, 120, 40)
	press(m, "g", "o")
	v := m.View()
	flat := strings.Join(strings.Fields(v), " ") // the verdict wraps
	if !strings.Contains(flat, "not the allocator's to give: 1.56 GiB of the device is held outside the caching allocator") ||
		!strings.Contains(flat, "HCCL 1.20 GiB, RUNTIME 310 MiB, AICPU 64.0 MiB") {
		t.Errorf("OOM panel:\n%s", v)
	}
	checkFrame(t, v, 120, 40)
}

// TestHintNamesOOMKey: where the source has an oom entry (before or after
// the cursor) the hint line starts with the key that explains it; a source
// without one does not waste the room.
func TestHintNamesOOMKey(t *testing.T) {
	hint := func(m *Model) string { v := strings.Split(m.View(), "\n"); return v[len(v)-1] }
	m := newSized(t, testOptions(smallWithOps(t)), 80, 24)
	for _, keys := range [][]string{{"G"}, {"g"}} { // after the oom, then before it
		press(m, keys...)
		if h := hint(m); !strings.HasPrefix(strings.TrimSpace(h), "o next OOM") {
			t.Errorf("after %v: hint %q", keys, h)
		}
	}
	snap := smallSnapshot(true)
	tr := snap.DeviceTraces[0]
	snap.DeviceTraces[0] = slices.DeleteFunc(slices.Clone(tr), func(e snapshot.TraceEntry) bool { return e.Action == snapshot.ActionOOM })
	m = newSized(t, testOptions(storeOf(t, snap, nil)), 80, 24)
	if h := hint(m); strings.Contains(h, "OOM") {
		t.Errorf("no oom in the source, hint %q", h)
	}
}

// TestOOMPanelGivesWay: however short the screen, the panel keeps the
// verdict, the first frame of the failing stack and the top holder; the
// rest gives way in its documented order, and a tall screen shows it all.
func TestOOMPanelGivesWay(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 80, 24)
	o := &oomFacts{seq: 7, requested: 64 << 20, verdict: "shortage", reason: strings.Repeat("figures and words ", 12)}
	for i := range 6 {
		o.frames = append(o.frames, snapshot.Frame{Filename: "train.py", Line: int64(10 + i), Name: fmt.Sprint("f", i)})
	}
	for i := range 5 {
		o.top = append(o.top, explain.Group{Key: fmt.Sprint("holder", i), Bytes: int64(5-i) << 20, Count: 1})
	}
	full := m.vw.x.oomLines(m.paneCtx(), o, 100)
	all := strings.Join(full, "\n")
	for _, want := range []string{"f3", "holder4", "o: next OOM", "figures and words"} {
		if !strings.Contains(all, want) {
			t.Fatalf("a tall panel lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "f4") {
		t.Errorf("more than four frames:\n%s", all)
	}
	prev := len(full)
	for body := len(full); body >= 13; body-- {
		lines := m.vw.x.oomLines(m.paneCtx(), o, body)
		v := strings.Join(lines, "\n")
		if len(lines) > body || len(lines) > prev {
			t.Fatalf("body %d: %d lines (the one above had %d):\n%s", body, len(lines), prev, v)
		}
		prev = len(lines)
		for _, want := range []string{"verdict              shortage", "figures", "f0", "top holders", "holder0", "cached free"} {
			if !strings.Contains(v, want) {
				t.Fatalf("body %d lacks %q:\n%s", body, want, v)
			}
		}
		// holders go only after the frames past the first have
		if strings.Contains(v, "f1") && !strings.Contains(v, "holder4") {
			t.Errorf("body %d: a holder went before a frame:\n%s", body, v)
		}
	}
}

// TestStackFromEvent: v on the events pane opens the stack of the entry at
// the cursor; on a block, the block's.
func TestStackFromEvent(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 120, 40)
	press(m, "3", "g", "right", "right", "v")
	if v := m.View(); !strings.Contains(v, "entry #1  alloc") || !strings.Contains(v, "forward  train.py:42") {
		t.Fatalf("event stack:\n%s", m.View())
	}
	press(m, "esc", "2", "enter", "down", "v")
	if v := m.View(); !strings.Contains(v, "block 0x7f0000800000") {
		t.Fatalf("block stack:\n%s", v)
	}
}

// TestHelpListsExplainKeys: ? names the new keys.
func TestHelpListsExplainKeys(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 160, 48)
	press(m, "?")
	v := m.View()
	for _, want := range []string{"holders: who holds memory", "mark A", "view the whole stack", "group by", "next OOM: its panel"} {
		if !strings.Contains(v, want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// TestCategoryChart: C stacks the timeline by memory category (the bands
// drawn with their letters, the legend on the status line); C again goes
// back to the areas.
func TestCategoryChart(t *testing.T) {
	m := newSized(t, testOptions(smallWithOps(t)), 120, 40)
	press(m, "C")
	v := m.View()
	if !strings.Contains(v, "timeline by category: P parameter") || !strings.Contains(v, "T temporary") {
		t.Fatalf("no legend after C:\n%s", v)
	}
	if !m.p.tl.catChart || m.p.tl.tl.View() == "" || !regexp.MustCompile(`[PGOATWU]`).MatchString(m.p.tl.tl.View()) {
		t.Fatalf("no category bands on the timeline:\n%s", m.p.tl.tl.View())
	}
	press(m, "C")
	if m.p.tl.catChart || regexp.MustCompile(`[PGOATWU]{2}`).MatchString(m.p.tl.tl.View()) {
		t.Fatalf("C did not go back to the areas:\n%s", m.p.tl.tl.View())
	}
}
