package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// recSource is the real Store, remembering the last segment map it
// handed out by position.
type recSource struct {
	*store.Store
	lastSeq   int64
	lastState store.State
}

func (r *recSource) StateAtSeq(dev int, n int64) store.State {
	r.lastSeq, r.lastState = n, r.Store.StateAtSeq(dev, n)
	return r.lastState
}

func blockAt(st store.State, addr uint64) (snapshot.BlockState, bool) {
	for _, s := range st.Segments {
		for _, b := range s.Blocks {
			if b.Address == addr {
				return b.State, true
			}
		}
	}
	return 0, false
}

// TestStepThroughOneMicrosecond: the real fixture has three entries in
// one microsecond (free_requested A, free_completed A, free_requested B);
// → steps through them one at a time — summary, segment map and the
// highlighted event follow each entry — and ← steps back the same way.
func TestStepThroughOneMicrosecond(t *testing.T) {
	st := fixtureSource(t)
	src := &recSource{Store: st}
	evs := st.Events(0, -1<<62, 1<<62, 0)
	g := -1
	for i := 0; i+3 <= len(evs); i++ {
		if evs[i].Time == evs[i+2].Time && (i == 0 || evs[i-1].Time != evs[i].Time) && (i+3 == len(evs) || evs[i+3].Time != evs[i].Time) {
			g = i
			break
		}
	}
	if g <= 0 {
		t.Fatal("fixture has no three-entry microsecond")
	}
	grp := evs[g : g+3]
	if grp[0].Action != snapshot.ActionFreeRequested || grp[1].Action != snapshot.ActionFreeCompleted || grp[1].Addr != grp[0].Addr {
		t.Fatalf("unexpected group %+v", grp)
	}
	m := newSized(t, fixtureOptions(src), 160, 48)
	m.setCursor(grp[0].Time - 1) // a time jump: just before the group
	if m.Summary().Applied != int64(g) {
		t.Fatalf("before the group: applied %d, want %d", m.Summary().Applied, g)
	}
	wantBlock := []snapshot.BlockState{snapshot.StateActivePendingFree, snapshot.StateInactive, snapshot.StateInactive}
	for k := range 3 {
		press(m, "right")
		n := int64(g + k + 1)
		if m.Summary().Applied != n || m.Cursor() != grp[0].Time {
			t.Fatalf("step %d: applied %d cursor %d, want %d at %d", k, m.Summary().Applied, m.Cursor(), n, grp[0].Time)
		}
		if src.lastSeq != n {
			t.Fatalf("step %d: segment map drawn at position %d, want %d", k, src.lastSeq, n)
		}
		// the block of A: pending after the request, free after completion
		if s, ok := blockAt(src.lastState, grp[0].Addr); !ok || s != wantBlock[k] {
			t.Fatalf("step %d: block %#x is %v (found %v), want %v", k, grp[0].Addr, s, ok, wantBlock[k])
		}
		if m.p.ev.cur < 0 || m.p.ev.events[m.p.ev.cur].Seq != n-1 {
			t.Fatalf("step %d: highlighted event %d, want entry %d", k, m.p.ev.cur, n-1)
		}
		var row string
		for _, l := range strings.Split(m.View(), "\n") {
			if strings.Contains(l, "▶") {
				row = l
			}
		}
		if !strings.Contains(row, grp[k].Action.String()) || !strings.Contains(row, fmt.Sprintf("%#x", grp[k].Addr)) {
			t.Fatalf("step %d: highlighted row %q is not %v %#x", k, row, grp[k].Action, grp[k].Addr)
		}
	}
	if !strings.Contains(m.View(), fmt.Sprintf("entry #%d/", g+2)) {
		t.Fatalf("header does not say entry #%d", g+2)
	}
	for k := 2; k >= 0; k-- {
		press(m, "left")
		if n := int64(g + k); m.Summary().Applied != n || src.lastSeq != n {
			t.Fatalf("back %d: applied %d (map at %d), want %d", k, m.Summary().Applied, src.lastSeq, n)
		}
	}
	if m.Cursor() != evs[g-1].Time {
		t.Fatalf("back before the group: cursor %d, want %d", m.Cursor(), evs[g-1].Time)
	}
	// a time jump after stepping applies every entry of its microsecond
	press(m, "right", "right")
	m.setCursor(grp[0].Time)
	if m.Summary().Applied != int64(g+3) {
		t.Fatalf("time cursor at the group: applied %d, want %d", m.Summary().Applied, g+3)
	}
}
