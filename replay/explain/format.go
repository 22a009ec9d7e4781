package explain

import (
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/cells"
	"github.com/npumon/npumon/replay/frames"
)

// FormatFrame renders a frame as "function  …/dir/file.py:line" in at most
// width terminal cells (width ≤ 0: no limit). The path gives way first,
// from the left, so the file name and line stay; then the function, from
// the right.
func FormatFrame(f snapshot.Frame, width int) string {
	loc := ":" + strconv.FormatInt(f.Line, 10)
	path := f.Filename
	full := f.Name + "  " + path + loc
	if width <= 0 || Width(full) <= width {
		return full
	}
	name := f.Name
	// keep at least the base name: the path budget is what the name leaves
	base := path
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		base = path[i+1:]
	}
	minPath := Width("…/"+base) + len(loc)
	maxName := width - 2 - minPath
	if Width(name) > maxName {
		name = TruncRight(name, max(maxName, 1))
	}
	room := width - Width(name) - 2 - len(loc)
	return name + "  " + TruncLeft(path, room) + loc
}

// The truncation helpers below measure in terminal cells (a CJK rune
// takes two, a combining mark none), never in bytes or runes; they are
// internal/cells's, the one implementation every view that shortens a
// name goes through. A cut is marked "…" (one cell).

// Width is the display width of plain text (no escape sequences) in
// terminal cells.
func Width(s string) int { return cells.Width(s) }

// TruncLeft shortens s from the left to at most n cells, marking the cut
// with "…" (and keeping whole path elements when it can).
func TruncLeft(s string, n int) string { return cells.TruncLeft(s, n) }

// TruncRight shortens s from the right to at most n cells, ending in "…".
func TruncRight(s string, n int) string { return cells.TruncRight(s, n) }

// TruncMiddle shortens s to at most n cells by cutting its middle, marked
// "…": a file name keeps both what it is (oom_snapshot_…) and which one
// (…_step000039.pickle).
func TruncMiddle(s string, n int) string { return cells.TruncMiddle(s, n) }

// TruncDistinct shortens s, one name of a list shown together (others:
// the rest of the list, s itself may be among them), to at most n cells
// so that it still reads differently from every other name: the part s
// shares with its most alike neighbours at the front gives way first.
// Names that differ only at the end ("Block.forward (layers.0)" …
// "(layers.4)") keep their ends ("Block.f…layers.0)"), not five identical
// heads; a name whose start already tells it apart is cut at the right,
// as TruncRight. Names that differ in the middle keep the part from
// where they differ, cut at both ends. For a long list, Names finds what
// each name shares without comparing every pair.
func TruncDistinct(s string, n int, others []string) string {
	if Width(s) <= n {
		return s
	}
	r := []rune(s)
	p := 0
	for _, o := range others {
		if o != s {
			p = max(p, commonPrefix(r, o))
		}
	}
	return TruncShared(s, n, p)
}

// TruncShared is TruncDistinct for a name whose first shared runes are
// the same as another name's (the rest of the name tells them apart).
func TruncShared(s string, n, shared int) string {
	if Width(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	r := []rune(s)
	p := min(max(shared, 0), len(r)-1) // s is a prefix of another name: its end tells
	if Width(string(r[:p+1])) < n {
		return TruncRight(s, n) // the first rune that differs is still shown
	}
	// a0: the start of the word holding the first differing rune, so the
	// kept part reads "…layers.0)", not "….0)"; the room decides how much
	// of it stays
	a0 := wordStart(r, p)
	a := a0
	for a < p && Width(string(r[a:]))+1 > n {
		a++
	}
	if tw := Width(string(r[a:])); tw+1 <= n {
		// all of the rest fits: the head takes what is left of the room
		return string(cells.Head(r[:a], n-1-tw)) + "…" + string(r[a:])
	}
	// the common end is long too: the differing word, cut at both ends
	for a = a0; a < p && Width(string(r[a:p+1])) > n-2; a++ {
	}
	return "…" + string(cells.Head(r[a:], n-2)) + "…"
}

// wordStart is where the word holding r[p] begins: the identifier before
// it and, when that has no letters (the "0" of "layers.0", the "1" of
// "layers.12"), the one before the '.' too; at most 16 runes back.
func wordStart(r []rune, p int) int {
	a := p
	for a > 0 && p-a < 16 && isIdent(r[a-1]) {
		a--
	}
	if !slices.ContainsFunc(r[a:p+1], unicode.IsLetter) && a > 1 && r[a-1] == '.' && isIdent(r[a-2]) {
		for a--; a > 0 && p-a < 16 && isIdent(r[a-1]); a-- {
		}
	}
	return a
}

func isIdent(c rune) bool { return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) }

// Names is a list of names shown together (a column of group keys), for
// TruncShared: what each name shares at the front with its most alike
// other name, found by sorting (that name is a neighbour in sorted
// order), not by comparing every pair.
type Names struct{ shared map[string]int }

// NewNames indexes names (duplicates count once).
func NewNames(names []string) *Names {
	sorted := slices.Compact(slices.Sorted(slices.Values(names)))
	ns := &Names{shared: make(map[string]int, len(sorted))}
	for i, s := range sorted {
		p := 0
		r := []rune(s)
		if i > 0 {
			p = commonPrefix(r, sorted[i-1])
		}
		if i+1 < len(sorted) {
			p = max(p, commonPrefix(r, sorted[i+1]))
		}
		ns.shared[s] = p
	}
	return ns
}

// Shared is the number of runes s shares at the front with the most alike
// other name (0 for a name not in the list, or a nil Names).
func (ns *Names) Shared(s string) int {
	if ns == nil {
		return 0
	}
	return ns.shared[s]
}

// Trunc shortens s, one of the names, to at most n cells as TruncDistinct.
func (ns *Names) Trunc(s string, n int) string { return TruncShared(s, n, ns.Shared(s)) }

// commonPrefix returns how many runes r and o share at the front.
func commonPrefix(r []rune, o string) int {
	p := 0
	for _, c := range o {
		if p == len(r) || r[p] != c {
			break
		}
		p++
	}
	return p
}

// StackText is a stack as text lines, innermost first: the user frames and
// the call site's frame (FormatFrame, in width runes), each run of other
// frames folded into one line ("… 44 native frames", frames.Rules.Fold).
func StackText(r *frames.Rules, st snapshot.Stack, width int) []string {
	keep := -1
	if s, ok := r.Callsite(st); ok {
		keep = s.Index
	}
	var out []string
	for _, l := range r.Fold(st, keep) {
		if l.Folded {
			out = append(out, l.Text())
		} else {
			out = append(out, FormatFrame(st[l.Start], width))
		}
	}
	return out
}
