package theme

import "strings"

// asciiText is the one table of --ascii for fixed texts (units, arrows,
// separators, box drawing) wherever a view draws them: the main screen, the
// ranks overview and the what-if view. The glyphs that carry meaning come
// from the ASCII Glyphs already (a free block is '.', docs/tui.md); a `·`
// in text is a separator and, like `•` and `│`, becomes `|`.
var asciiText = strings.NewReplacer("×", "x", "µ", "u", "Δ", "d", "…", "...", "←", "<-", "→", "->",
	"↑", "up", "↓", "down", "•", "|", "─", "-", "│", "|", "┆", ":", "✗", "X", "█", "#", "▒", "+", "░", ".", "▶", ">", "·", "|",
	"∞", "inf", "—", "-", "–", "-", "≈", "~", "≤", "<=", "≥", ">=")

// ToASCII makes a line of text pure ASCII for --ascii: the characters of
// the table, and '?' for anything unforeseen.
func ToASCII(s string) string {
	s = asciiText.Replace(s)
	for _, r := range s {
		if r >= 0x80 {
			return strings.Map(func(r rune) rune {
				if r >= 0x80 {
					return '?'
				}
				return r
			}, s)
		}
	}
	return s
}
