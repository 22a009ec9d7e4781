package tui

import (
	"strings"
	"testing"
)

func TestViewShowsEveryPane(t *testing.T) {
	m := newSized(t, testOptions(newFakeSource(smallSnapshot(true), smallOps())), 160, 48)
	v := m.View()
	checkFrame(t, v, 160, 48)
	t.Log("\n" + v)
	for _, want := range []string{"npumon", "small.pickle", "Timeline", "Segments", "Events", "Ops", "aten::matmul"} {
		if !strings.Contains(v, want) {
			t.Errorf("view lacks %q", want)
		}
	}
}

func TestCompactView(t *testing.T) {
	m := newSized(t, testOptions(newFakeSource(smallSnapshot(true), smallOps())), 80, 24)
	v := m.View()
	checkFrame(t, v, 80, 24)
	t.Log("\n" + v)
}
