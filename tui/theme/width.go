package theme

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/npumon/npumon/internal/cells"
)

// Width returns the display width of s, skipping ANSI escape sequences.
// It is a fast path for the screen's own text (ASCII, box drawing, block
// elements) that ansi.StringWidth's grapheme segmentation makes slow;
// other runes take cells.Rune's width, the one rule.
func Width(s string) int {
	w := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			i = skipEscape(s, i)
		case c < 0x80:
			if c >= 0x20 && c != 0x7f {
				w++
			}
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			w += cells.Rune(r) // the one rune width (internal/cells)
			i += n
		}
	}
	return w
}

// skipEscape returns the index after the escape sequence starting at s[i].
func skipEscape(s string, i int) int {
	i++
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[': // CSI: parameters then a final byte 0x40–0x7E
		i++
		for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
			i++
		}
		return i + 1
	case ']': // OSC: up to BEL or ESC \
		for i < len(s) && s[i] != 0x07 && s[i] != 0x1b {
			i++
		}
		if i < len(s) && s[i] == 0x1b {
			i++
		}
		return i + 1
	}
	return i + 1
}

// Fit pads or truncates a styled line to exactly w cells.
func Fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	sw := Width(s)
	if sw > w {
		return ansi.Truncate(s, w, "")
	}
	if sw == w {
		return s
	}
	return s + spaces(w-sw)
}

const blanks = "                                                                                                                                "

func spaces(n int) string {
	if n <= len(blanks) {
		return blanks[:n]
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = ' '
	}
	return string(b)
}

// Fit is the package Fit, but a line cut at w ends in the theme's ellipsis,
// so a reader sees that something was cut.
func (t *Theme) Fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if Width(s) > w {
		return ansi.Truncate(s, w, t.G.Ellipsis)
	}
	return Fit(s, w)
}

// Wrap breaks plain text into lines of at most w cells at spaces (a word
// wider than w gets a line of its own).
func Wrap(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case Width(line)+1+Width(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	if line != "" {
		out = append(out, line)
	}
	return out
}
