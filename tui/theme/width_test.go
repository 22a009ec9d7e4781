package theme

import (
	"slices"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

func TestWidthMatchesAnsi(t *testing.T) {
	for _, s := range []string{
		"", "abc", "█▒░·│─┆✗▶×µΔ…", "\x1b[1;38;2;1;2;3mbold\x1b[0m x", "日本語", "\x1b]8;;http://x\x07link\x1b]8;;\x07",
		"tab\tx", "a\x1b[7m▶ 0x7f\x1b[m",
	} {
		if got, want := Width(s), ansi.StringWidth(s); got != want {
			t.Errorf("Width(%q) = %d, ansi says %d", s, got, want)
		}
	}
}

func TestFit(t *testing.T) {
	for _, c := range []struct {
		in   string
		w    int
		want string
	}{{"abc", 5, "abc  "}, {"abcdef", 3, "abc"}, {"ab", 2, "ab"}, {"x", 0, ""}} {
		t.Run(c.in, func(t *testing.T) {
			if got := Fit(c.in, c.w); got != c.want {
				t.Errorf("Fit(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
			}
		})
	}
	if got := Width(Fit("\x1b[1mlong styled text\x1b[0m", 4)); got != 4 {
		t.Errorf("truncated styled width %d", got)
	}
}

func TestWrap(t *testing.T) {
	got := Wrap("the baseline fits  the request", 12)
	want := []string{"the baseline", "fits the", "request"}
	if !slices.Equal(got, want) {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
	if got := Wrap("a·wide·word·longer·than·w", 5); len(got) != 1 {
		t.Errorf("a word wider than w keeps a line of its own: %q", got)
	}
	if got := Wrap("   ", 10); len(got) != 0 {
		t.Errorf("blank text wraps to no lines: %q", got)
	}
}
