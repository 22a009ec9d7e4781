package tui

import (
	"strconv"
	"strings"
)

// streamLabels names a device's streams s0, s1, … in order of first
// appearance in the trace, so the events pane shows a short label that
// tells streams apart (CUDA stream handles are pointers) while details show
// the full handle and the filter takes either. A stream the trace never used
// (a segment's only) is named when first seen, after the trace's.
type streamLabels struct {
	ids []uint64
	idx map[uint64]int
}

// reset starts over from a trace's streams in order of appearance.
func (t *streamLabels) reset(ids []uint64) {
	t.ids = append(t.ids[:0], ids...)
	t.idx = make(map[uint64]int, len(ids))
	for i, s := range t.ids {
		t.idx[s] = i
	}
}

// label returns the stream's label.
func (t *streamLabels) label(s uint64) string {
	i, ok := t.idx[s]
	if !ok {
		if t.idx == nil {
			t.idx = map[uint64]int{}
		}
		i = len(t.ids)
		t.ids = append(t.ids, s)
		t.idx[s] = i
	}
	return "s" + strconv.Itoa(i)
}

// width is the widest label given so far (2 at least).
func (t *streamLabels) width() int { return 1 + len(strconv.Itoa(max(1, len(t.ids)-1))) }

// describe is a stream as details show it: label and full handle.
func (t *streamLabels) describe(s uint64) string {
	return t.label(s) + " (" + streamHandle(s) + ")"
}

// lookup resolves a label ("s1") to its stream.
func (t *streamLabels) lookup(label string) (uint64, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(label), "s"))
	if err != nil || !strings.HasPrefix(strings.ToLower(label), "s") || n < 0 || n >= len(t.ids) {
		return 0, false
	}
	return t.ids[n], true
}

// streamHandle is the full stream id: small ids in decimal (torch_npu's
// stream indices), handles in hex (CUDA's pointers).
func streamHandle(s uint64) string {
	if s < 1_000_000 {
		return strconv.FormatUint(s, 10)
	}
	return "0x" + strconv.FormatUint(s, 16)
}
