package explain

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/frames"
)

// FormatFrame renders a frame as "function  …/dir/file.py:line" in at most
// width runes (width ≤ 0: no limit). The path gives way first, from the
// left, so the file name and line stay; then the function, from the right.
func FormatFrame(f snapshot.Frame, width int) string {
	loc := ":" + strconv.FormatInt(f.Line, 10)
	path := f.Filename
	full := f.Name + "  " + path + loc
	if width <= 0 || utf8.RuneCountInString(full) <= width {
		return full
	}
	name := f.Name
	// keep at least the base name: the path budget is what the name leaves
	base := path
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		base = path[i+1:]
	}
	minPath := utf8.RuneCountInString("…/"+base) + len(loc)
	maxName := width - 2 - minPath
	if utf8.RuneCountInString(name) > maxName {
		name = TruncRight(name, max(maxName, 1))
	}
	room := width - utf8.RuneCountInString(name) - 2 - len(loc)
	return name + "  " + TruncLeft(path, room) + loc
}

// TruncLeft shortens s from the left to at most n runes, marking the cut
// with "…" (and keeping whole path elements when it can).
func TruncLeft(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	tail := r[len(r)-(n-1):]
	// start at a separator when there is one, so the cut reads "…/dir/file"
	for i, c := range tail {
		if (c == '/' || c == '\\') && i < len(tail)-1 {
			tail = tail[i:]
			break
		}
	}
	return "…" + string(tail)
}

// TruncRight shortens s from the right to at most n runes, ending in "…".
func TruncRight(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	return string(r[:n-1]) + "…"
}

// TruncMiddle shortens s to at most n runes by cutting its middle, marked
// "…": a file name keeps both what it is (oom_snapshot_…) and which one
// (…_step000039.pickle).
func TruncMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	head := (n - 1) / 2
	return string(r[:head]) + "…" + string(r[len(r)-(n-1-head):])
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
