package cells

import "testing"

func TestTrunc(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(string, int) string
		s    string
		n    int
		want string
	}{
		{"right", TruncRight, "abcdef", 4, "abc…"},
		{"right fits", TruncRight, "abcd", 4, "abcd"},
		{"right tiny", TruncRight, "abcd", 1, "…"},
		{"right zero", TruncRight, "abcd", 0, "…"},
		{"right CJK", TruncRight, "显存占用", 5, "显存…"}, // 4 cells of runes, then the mark
		{"tail", TruncTail, "/data/run/rank3", 6, "…rank3"},
		{"tail CJK", TruncTail, "显存占用", 5, "…占用"},
		{"left path", TruncLeft, "/a/b/c.py", 6, "…/c.py"},
		{"left no sep", TruncLeft, "abcdefgh", 4, "…fgh"},
		{"middle", TruncMiddle, "oom_snapshot_step000039.pickle", 15, "oom_sna….pickle"},
		{"middle CJK", TruncMiddle, "显存显存显存", 7, "显…显存"},
	} {
		got := c.f(c.s, c.n)
		if got != c.want {
			t.Errorf("%s: (%q, %d) = %q, want %q", c.name, c.s, c.n, got, c.want)
		}
		if c.n > 0 && Width(got) > c.n {
			t.Errorf("%s: %q is %d cells, over %d", c.name, got, Width(got), c.n)
		}
	}
}

func TestPad(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"npu", 6, "npu   "},
		{"abcdefgh", 6, "abcde…"},
		{"显存", 6, "显存  "},   // two wide runes are four cells
		{"显存占用", 6, "显存… "}, // five cells with the mark, then a space
	} {
		got := Pad(c.s, c.n)
		if got != c.want || Width(got) != c.n {
			t.Errorf("Pad(%q, %d) = %q (%d cells), want %q", c.s, c.n, got, Width(got), c.want)
		}
	}
}
