// Package cells measures and shortens plain text (no escape sequences) in
// terminal cells: a CJK rune takes two, a combining mark none, never bytes
// or runes. It is the one truncation implementation: replay/explain's
// name cutting, the TUI's panes and views and the ranks overview all go
// through it. A cut is marked "…" (one cell; --ascii turns it into "..."
// when the screen is drawn).
package cells

import (
	"strings"

	"github.com/mattn/go-runewidth"
)

// Ellipsis marks a cut.
const Ellipsis = "…"

// Width is the display width of s in terminal cells.
func Width(s string) int {
	w := 0
	for _, r := range s {
		w += Rune(r)
	}
	return w
}

// Rune is the width of one rune in terminal cells: printable ASCII, the
// rest of Latin-1 and Latin Extended, arrows, box drawing, block elements
// and geometric shapes (the screen's own glyphs) take one without asking
// go-runewidth, which decides the others. tui/theme.Width measures styled
// text by this rule too.
func Rune(r rune) int {
	switch {
	case r >= 0x20 && r < 0x7f:
		return 1
	case r < 0x20 || r == 0x7f:
		return 0
	case r < 0x300 || (r >= 0x2190 && r <= 0x25ff):
		return 1
	}
	return runewidth.RuneWidth(r)
}

// Head is the longest prefix of r in at most n cells.
func Head(r []rune, n int) []rune {
	w := 0
	for i, c := range r {
		if w += Rune(c); w > n {
			return r[:i]
		}
	}
	return r
}

// Tail is the longest suffix of r in at most n cells.
func Tail(r []rune, n int) []rune {
	w := 0
	for i := len(r) - 1; i >= 0; i-- {
		if w += Rune(r[i]); w > n {
			return r[i+1:]
		}
	}
	return r
}

// TruncRight shortens s from the right to at most n cells, ending in "…".
func TruncRight(s string, n int) string {
	if Width(s) <= n {
		return s
	}
	if n <= 1 {
		return Ellipsis
	}
	return string(Head([]rune(s), n-1)) + Ellipsis
}

// TruncTail shortens s from the left to at most n cells, starting with
// "…": the end of s stays (a source name's rank, a path's file).
func TruncTail(s string, n int) string {
	if Width(s) <= n {
		return s
	}
	if n <= 1 {
		return Ellipsis
	}
	return Ellipsis + string(Tail([]rune(s), n-1))
}

// TruncLeft is TruncTail for a path: the cut starts at a separator when
// the kept tail has one, so it reads "…/dir/file", not "…ir/file".
func TruncLeft(s string, n int) string {
	if Width(s) <= n {
		return s
	}
	if n <= 1 {
		return Ellipsis
	}
	tail := Tail([]rune(s), n-1)
	for i, c := range tail {
		if (c == '/' || c == '\\') && i < len(tail)-1 {
			tail = tail[i:]
			break
		}
	}
	return Ellipsis + string(tail)
}

// TruncMiddle shortens s to at most n cells by cutting its middle, marked
// "…": a file name keeps both what it is (oom_snapshot_…) and which one
// (…_step000039.pickle).
func TruncMiddle(s string, n int) string {
	if Width(s) <= n {
		return s
	}
	if n <= 1 {
		return Ellipsis
	}
	r := []rune(s)
	head := Head(r, (n-1)/2)
	return string(head) + Ellipsis + string(Tail(r[len(head):], n-1-Width(string(head))))
}

// Pad is s shortened to at most n cells (TruncRight) and padded with
// spaces to exactly n: a column fmt's %-Ns would pad by runes, so a wide
// rune would push the next column out.
func Pad(s string, n int) string {
	s = TruncRight(s, n)
	if w := Width(s); w < n {
		s += strings.Repeat(" ", n-w)
	}
	return s
}
