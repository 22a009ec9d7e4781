package tui

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/monitor/store"
)

// FuzzParseFilter: any `/` text is either rejected with an error or gives a
// filter that can be applied, never a panic.
func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"size>10MiB", "stream=0x7 matmul|conv", "size<=4KiB size>=1", "(", "size>", "stream=", "size>1e400GiB", "ä*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := parseFilter(s)
		if err != nil || flt == nil {
			return
		}
		e := store.Event{}
		e.Size, e.Stream = 1<<20, 7
		flt.matchEvent(&e, &streamLabels{}, func() string { return "aten::matmul\nfile.py:1:f" })
		flt.matchOp(&store.Op{Name: "aten::conv2d", MemDelta: -5})
	})
}

// FuzzParseJump: any `t` text either errors or yields a cursor; the model
// clamps it, so jumping never panics or leaves the screen unrenderable.
func FuzzParseJump(f *testing.F) {
	for _, s := range []string{"07:06:40.004", "+2ms", "#5", "#-1", "+", "12:", "99:99:99", "-1", "#99999999999999999999", "+1h2m"} {
		f.Add(s)
	}
	m := small(f, 80, 24)
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsAny(s, "\n\r") {
			return
		}
		c, err := m.parseJump(s)
		if err != nil {
			return
		}
		m.setCursor(c)
		if m.Cursor() < m.d.first-1 || m.Cursor() > m.d.last {
			t.Fatalf("cursor %d outside [%d, %d]", m.Cursor(), m.d.first-1, m.d.last)
		}
		_ = m.View()
	})
}

func TestNoSourceDoesNotPanic(t *testing.T) {
	m := newSized(t, Options{}, 80, 24)
	if v := m.View(); !strings.Contains(v, "waiting for data") {
		t.Fatalf("no source:\n%s", v)
	}
	press(m, "right", "g", "2", "enter", "/", "x", "enter", "?", "esc")
	checkFrame(t, m.View(), 80, 24)
}
