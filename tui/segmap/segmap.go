// Package segmap draws the segment map pane: every segment of a device as a
// bar with its blocks to scale inside it (allocated, pending free, rounding
// slack and free told apart by glyph as well as colour), with a selectable
// segment and block and a detail view of the selection.
package segmap

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

// Model is the segment map pane state.
type Model struct {
	th       *theme.Theme
	segs     []snapshot.Segment // sorted by address
	sel      int                // selected segment index
	blk      int                // selected block index, -1 when selecting segments
	drawnTop int                // first segment line as last drawn (for clicks)
	selAd    uint64             // address of the selected segment, kept across states
	blkAd    uint64
	bySize   bool // largest segments first instead of address order

	// Stream names a stream in details (default: its id in decimal).
	Stream func(uint64) string
}

// New returns an empty segment map.
func New(th *theme.Theme) Model { return Model{th: th, blk: -1} }

// SetState shows st, keeping the selection on the same addresses when they
// still exist.
func (m *Model) SetState(st store.State) {
	m.segs = st.Segments
	m.sortSegs()
	if m.blk >= 0 {
		m.blk = -1
		if s := m.Segment(); s != nil && s.Address == m.selAd {
			for i, b := range s.Blocks {
				if b.Address <= m.blkAd && m.blkAd < b.Address+uint64(max(b.Size, 1)) {
					m.blk = i
				}
			}
			if m.blk < 0 && len(s.Blocks) > 0 {
				m.blk = 0
			}
		}
	}
	m.remember()
}

// sortSegs orders the segments (by address, or largest first) and finds
// the remembered selection again.
func (m *Model) sortSegs() {
	segs := m.segs
	if m.bySize {
		sort.SliceStable(segs, func(i, j int) bool {
			if segs[i].TotalSize != segs[j].TotalSize {
				return segs[i].TotalSize > segs[j].TotalSize
			}
			return segs[i].Address < segs[j].Address
		})
	} else {
		sort.SliceStable(segs, func(i, j int) bool { return segs[i].Address < segs[j].Address })
	}
	m.sel = 0
	for i := range segs {
		if segs[i].Address == m.selAd {
			m.sel = i
			break
		}
		if !m.bySize && segs[i].Address < m.selAd {
			m.sel = min(i+1, len(segs)-1) // the next segment when the selected one is gone
		}
	}
}

// ToggleSort switches between address order and largest first and
// returns the order's name.
func (m *Model) ToggleSort() string {
	m.bySize = !m.bySize
	m.sortSegs()
	return m.SortName()
}

// SortName names the current order.
func (m *Model) SortName() string {
	if m.bySize {
		return "size"
	}
	return "address"
}

func (m *Model) remember() {
	if s := m.Segment(); s != nil {
		m.selAd = s.Address
		if b := m.Block(); b != nil {
			m.blkAd = b.Address
		}
	}
}

// Segment returns the selected segment, nil when there is none.
func (m *Model) Segment() *snapshot.Segment {
	if m.sel < 0 || m.sel >= len(m.segs) {
		return nil
	}
	return &m.segs[m.sel]
}

// Block returns the selected block, nil when selecting segments.
func (m *Model) Block() *snapshot.Block {
	s := m.Segment()
	if s == nil || m.blk < 0 || m.blk >= len(s.Blocks) {
		return nil
	}
	return &s.Blocks[m.blk]
}

// InBlocks reports whether the selection is inside a segment.
func (m *Model) InBlocks() bool { return m.blk >= 0 }

// Move moves the selection by d lines (segments, or blocks inside one).
func (m *Model) Move(d int) {
	if m.blk >= 0 {
		if s := m.Segment(); s != nil {
			m.blk = clamp(m.blk+d, 0, len(s.Blocks)-1)
		}
	} else {
		m.sel = clamp(m.sel+d, 0, len(m.segs)-1)
	}
	m.remember()
}

// SelectRow selects the segment on list row i as last drawn (0 = the first
// segment line under the legend); it reports whether a segment is there.
func (m *Model) SelectRow(i int) bool {
	if m.blk >= 0 || i < 0 || m.drawnTop+i >= len(m.segs) {
		return false
	}
	m.sel = m.drawnTop + i
	m.remember()
	return true
}

// Enter selects blocks inside the selected segment.
func (m *Model) Enter() {
	if s := m.Segment(); s != nil && len(s.Blocks) > 0 && m.blk < 0 {
		m.blk = 0
		m.remember()
	}
}

// Back leaves block selection; it reports whether there was anything to leave.
func (m *Model) Back() bool {
	if m.blk >= 0 {
		m.blk = -1
		return true
	}
	return false
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

// Legend is the one-line key to the bar glyphs.
func (m *Model) Legend() string {
	g := m.th.G
	return fmt.Sprintf("%c allocated  %c pending free  %c slack  %c free", g.Allocated, g.Pending, g.Slack, g.Free)
}

// View renders the map in w×h: a legend, one line per segment, and when
// h allows, detail lines for the selection (given by the caller).
func (m *Model) View(w, h int, detail []string) string {
	if w <= 0 || h <= 0 {
		return ""
	}
	th := m.th
	lines := make([]string, 0, h)
	var total int64
	for i := range m.segs {
		total += m.segs[i].TotalSize
	}
	g := th.G
	legend := fmt.Sprintf("%c alloc %c pending %c slack %c free", g.Allocated, g.Pending, g.Slack, g.Free)
	lines = append(lines, fit(th.Dim.Render(legend+"   "+theme.Count(len(m.segs), "segment", "segments")+", "+bytesize.Format(total)), w))
	if len(m.segs) == 0 {
		lines = append(lines, "no segments at this moment")
	}
	// Detail gets at most half the pane (but at least what is left over).
	listRows := h - 1
	if len(detail) > 0 && h >= 8 {
		listRows = max(3, (h-1)-min(len(detail)+1, (h-1)/2))
	}
	if m.blk >= 0 {
		listRows-- // caret line under the selected segment
	}
	listRows = max(1, listRows)
	// The first line follows from the selection alone (kept mid-pane), so
	// drawing changes no scroll state; drawnTop only lets a click find its
	// row.
	top := clamp(m.sel-listRows/2, 0, max(0, len(m.segs)-listRows))
	m.drawnTop = top
	addrW := 14
	sizeW := 9
	barW := w - 2 - addrW - 1 - sizeW - 1
	for i := top; i < len(m.segs) && i < top+listRows; i++ {
		s := &m.segs[i]
		mark := "  "
		if i == m.sel {
			mark = th.G.Selected + " "
		}
		head := fmt.Sprintf("%s%-*s %*s ", mark, addrW, fmt.Sprintf("0x%x", s.Address), sizeW, bytesize.Format(s.TotalSize))
		if i == m.sel && m.blk < 0 {
			head = th.Selected.Render(head)
		}
		bar, caret := m.bar(s, barW, i == m.sel)
		lines = append(lines, fit(head+bar, w))
		if caret != "" {
			lines = append(lines, fit(strings.Repeat(" ", 2+addrW+1+sizeW+1)+caret, w))
		}
	}
	if len(detail) > 0 && len(lines) < h {
		lines = append(lines, fit(th.Dim.Render(strings.Repeat(th.G.HBar, w)), w))
		for _, d := range detail {
			if len(lines) >= h {
				break
			}
			lines = append(lines, fit(d, w))
		}
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return strings.Join(lines[:h], "\n")
}

// Cell categories in drawing priority order for ties.
const (
	catAlloc = iota
	catPending
	catSlack
	catFree
	numCats
)

// bar draws s in n cells: each cell shows the category covering most of its
// bytes. It returns the bar and, when a block is selected, a caret line.
func (m *Model) bar(s *snapshot.Segment, n int, selected bool) (string, string) {
	if n <= 0 {
		return "", ""
	}
	th := m.th
	cells := make([][numCats]int64, n)
	owner := make([]int, n) // index of the allocated block owning most of the cell
	ownerB := make([]int64, n)
	for i := range owner {
		owner[i] = -1
	}
	total := float64(max(s.TotalSize, 1))
	add := func(from, to int64, cat, blk int) {
		if to <= from {
			return
		}
		a := int(float64(from) / total * float64(n))
		for c := a; c < n; c++ {
			cs := int64(float64(c) * total / float64(n))
			ce := int64(float64(c+1) * total / float64(n))
			lo, hi := max(from, cs), min(to, ce)
			if hi <= lo {
				if cs >= to {
					break
				}
				continue
			}
			cells[c][cat] += hi - lo
			if cat == catAlloc && hi-lo > ownerB[c] {
				owner[c], ownerB[c] = blk, hi-lo
			}
		}
	}
	covered := int64(0)
	for bi := range s.Blocks {
		b := &s.Blocks[bi]
		off := int64(b.Address - s.Address)
		switch b.State {
		case snapshot.StateActiveAllocated:
			req := b.RequestedSize
			if req <= 0 || req > b.Size {
				req = b.Size
			}
			add(off, off+req, catAlloc, bi)
			add(off+req, off+b.Size, catSlack, bi)
		case snapshot.StateActivePendingFree:
			add(off, off+b.Size, catPending, bi)
		default:
			add(off, off+b.Size, catFree, bi)
		}
		covered = max(covered, off+b.Size)
	}
	if covered < s.TotalSize {
		add(covered, s.TotalSize, catFree, -1)
	}
	var sb strings.Builder
	var caret strings.Builder
	selBlk := -1
	if selected {
		selBlk = m.blk
	}
	var selLo, selHi int64 = -1, -1
	if selBlk >= 0 && selBlk < len(s.Blocks) {
		selLo = int64(s.Blocks[selBlk].Address - s.Address)
		selHi = selLo + s.Blocks[selBlk].Size
	}
	run := strings.Builder{}
	var runStyle *lipgloss.Style
	flush := func() {
		if run.Len() == 0 {
			return
		}
		if runStyle == nil {
			sb.WriteString(run.String())
		} else {
			th.Wrap(&sb, runStyle, run.String())
		}
		run.Reset()
	}
	for c := 0; c < n; c++ {
		best := catFree
		for k := 0; k < numCats; k++ {
			if cells[c][k] > cells[c][best] {
				best = k
			}
		}
		var r rune
		var st *lipgloss.Style
		switch best {
		case catAlloc:
			r = th.G.Allocated
			st = &th.Allocated
			if th.Color && owner[c] >= 0 {
				st = &th.BlockPalette[owner[c]%len(th.BlockPalette)]
			}
		case catPending:
			r, st = th.G.Pending, &th.Pending
		case catSlack:
			r, st = th.G.Slack, &th.Slack
		default:
			r, st = th.G.Free, &th.Free
		}
		cs := int64(float64(c) * total / float64(n))
		ce := int64(float64(c+1) * total / float64(n))
		in := selLo >= 0 && cs < selHi && ce > selLo
		if selLo >= 0 && ce == cs && cs == selLo {
			in = true
		}
		if in {
			caret.WriteByte('^')
		} else {
			caret.WriteByte(' ')
		}
		if st != runStyle {
			flush()
			runStyle = st
		}
		run.WriteRune(r)
	}
	flush()
	if selLo < 0 {
		return sb.String(), ""
	}
	cs := strings.TrimRight(caret.String(), " ")
	if !strings.Contains(cs, "^") {
		// the block is smaller than a cell: point at its cell anyway
		c := int(float64(selLo) / total * float64(n))
		cs = strings.Repeat(" ", clamp(c, 0, n-1)) + "^"
	}
	return sb.String(), cs
}

// Detail returns lines describing the selected segment or block: address,
// sizes, stream, when it was allocated (allocAt, supplied by the caller) and
// the stack frames, each fitted to width cells.
func (m *Model) Detail(stack func(snapshot.StackID) snapshot.Stack, allocAt string, width int) []string {
	s := m.Segment()
	if s == nil {
		return nil
	}
	var out []string
	kind := s.SegmentType()
	if s.IsExpandable {
		kind += ", expandable"
	}
	if b := m.Block(); b != nil {
		out = append(out,
			fmt.Sprintf("block 0x%x  size %s  requested %s  %s", b.Address, bytesize.Format(b.Size), bytesize.Format(b.RequestedSize), b.State),
			fmt.Sprintf("segment 0x%x  stream %s  %s", s.Address, m.stream(s.Stream), kind))
		if allocAt != "" {
			out = append(out, "allocated "+allocAt)
		}
		frames := StackLines(stack(b.Frames), width)
		if len(frames) == 0 {
			return append(out, "no stack recorded for this block")
		}
		return append(append(out, frames...), "v: the whole stack")
	}
	out = append(out,
		fmt.Sprintf("segment 0x%x  size %s  stream %s  %s", s.Address, bytesize.Format(s.TotalSize), m.stream(s.Stream), kind),
		fmt.Sprintf("allocated %s  active %s  requested %s  %s", bytesize.Format(s.AllocatedSize), bytesize.Format(s.ActiveSize), bytesize.Format(s.RequestedSize), theme.Count(len(s.Blocks), "block", "blocks")))
	if s.HasPoolID {
		out = append(out, fmt.Sprintf("pool (%d, %d)", s.PoolID[0], s.PoolID[1]))
	}
	if frames := StackLines(stack(s.Frames), width); len(frames) > 0 {
		out = append(out, frames...)
	}
	out = append(out, "enter: select blocks")
	return out
}

func (m *Model) stream(s uint64) string {
	if m.Stream != nil {
		return m.Stream(s)
	}
	return strconv.FormatUint(s, 10)
}

// fit pads or truncates a styled line to exactly w cells.
func fit(s string, w int) string { return theme.Fit(s, w) }
