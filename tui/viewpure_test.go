package tui

import (
	"reflect"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// scrollState is what the full-screen views scroll and select with.
type scrollState struct {
	views  []xview
	at     int64
	groups int
	devTop int
}

func scrollOf(m *Model) scrollState {
	return scrollState{views: append([]xview(nil), m.vw.x.views...), at: m.vw.x.at, groups: len(m.vw.x.groups), devTop: m.vw.dev.top}
}

// viewTwice draws the model twice, forcing a fresh render each time, and
// fails when drawing changed the scroll state Update left.
func viewTwice(t *testing.T, m *Model) string {
	t.Helper()
	before := scrollOf(m)
	m.dirty = true
	v1 := m.View()
	m.dirty = true
	v2 := m.View()
	if after := scrollOf(m); !reflect.DeepEqual(before, after) {
		t.Fatalf("View changed the scroll state:\nbefore %+v\nafter  %+v", before, after)
	}
	if v1 != v2 {
		t.Fatalf("two Views differ:\n%s\n---\n%s", v1, v2)
	}
	return v1
}

// View never moves a selection or scroll offset: Update keeps them in
// range (after keys, new data and a resize), View only draws them.
func TestViewDoesNotScroll(t *testing.T) {
	m := newSized(t, fixtureOptions(fixtureSource(t)), 120, 40)
	press(m, "G", "h")
	for range 30 {
		press(m, "down")
	}
	v := viewTwice(t, m)
	sel := m.vw.x.top().sel
	if sel == 0 || !strings.Contains(v, m.th.G.Selected+" ") {
		t.Fatalf("selection %d not drawn:\n%s", sel, v)
	}
	// a smaller terminal: the selection stays on screen, moved there by Update
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if top := m.vw.x.top(); top.sel-top.top >= 24 {
		t.Fatalf("selection %d off a 24-row screen from %d", top.sel, top.top)
	}
	v = viewTwice(t, m)
	checkFrame(t, v, 80, 24)
	if !strings.Contains(v, m.th.G.Selected+" ") {
		t.Fatalf("selection not drawn after the resize:\n%s", v)
	}
	// a stack view scrolled past its end
	press(m, "v")
	for range 50 {
		press(m, "pgdown")
	}
	viewTwice(t, m)

	// the devices view scrolled past its last page
	o, _ := withFeed(t, procsFixture, 124528)
	m = newSized(t, o, 80, 24)
	press(m, "D", "end")
	if m.vw.dev.top == 1<<30 {
		t.Fatal("end left the scroll unclamped")
	}
	viewTwice(t, m)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 14})
	checkFrame(t, viewTwice(t, m), 80, 14)
}
