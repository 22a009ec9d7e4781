package timeline

import (
	"regexp"
	"strings"
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui/theme"
)

func testTheme(ascii bool) *theme.Theme {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.Ascii)
	return theme.New(r, ascii, true)
}

// ramp is a series over [0, cols) where column i holds i MiB allocated,
// 2i active and 100 MiB reserved.
func ramp(cols int) store.Series {
	s := store.Series{T0: 0, T1: int64(cols), Columns: cols}
	for i := 0; i < cols; i++ {
		v := int64(i) << 20
		s.Allocated = append(s.Allocated, store.MinMax{Min: v, Max: v})
		s.Active = append(s.Active, store.MinMax{Min: 2 * v, Max: 2 * v})
		s.Reserved = append(s.Reserved, store.MinMax{Min: 100 << 20, Max: 100 << 20})
	}
	return s
}

func TestColumnsAndCursor(t *testing.T) {
	m := New(testTheme(true))
	m.SetSize(46, 12)
	cols := m.Columns()
	if cols != 40 {
		t.Fatalf("columns %d, want 40 (46 − 5 label − 1 axis)", cols)
	}
	m.SetData(ramp(cols), []Marker{{T: 10, Kind: MarkStep}, {T: 30, Kind: MarkOOM}})
	m.SetCursor(20)
	m.SetHighlight(25, 28, true)
	v := m.View()
	lines := strings.Split(v, "\n")
	if len(lines) != 12 {
		t.Fatalf("%d lines, want 12", len(lines))
	}
	for i, l := range lines {
		if lipgloss.Width(l) != 46 {
			t.Fatalf("line %d is %d wide", i, lipgloss.Width(l))
		}
	}
	strip := []rune(lines[0])
	x0 := 6
	for col, want := range map[int]rune{10: ':', 20: 'v', 25: '=', 28: '=', 30: 'X'} {
		if strip[x0+col] != want {
			t.Errorf("strip column %d = %q, want %q (strip %q)", col, strip[x0+col], want, lines[0])
		}
	}
	// The area is 100 MiB reserved everywhere, so every graph row has '.' or better;
	// the last column is the tallest allocated one.
	if !strings.Contains(lines[len(lines)-3], "#") {
		t.Errorf("bottom row lacks allocated area:\n%s", v)
	}
	if m.ColumnOf(-1) != -1 || m.ColumnOf(39) != 39 || m.ColumnOf(40) != -1 {
		t.Errorf("ColumnOf bounds wrong")
	}
}

func TestXAxisIsFloat(t *testing.T) {
	// A 2 ms window in epoch µs: the labels must differ (timeserieslinechart
	// would round all of them to the same second).
	m := New(testTheme(false))
	m.SetSize(80, 10)
	cols := m.Columns()
	s := ramp(cols)
	s.T0, s.T1 = 1_700_000_000_000_000, 1_700_000_000_002_000
	m.Origin, m.Unit = s.T0, 1e6
	var labels []float64
	m.XLabel = func(x float64) string { labels = append(labels, x); return "L" }
	m.SetData(s, nil)
	m.View()
	if len(labels) < 2 || labels[1] <= labels[0] || labels[len(labels)-1] > 0.0021 {
		t.Fatalf("x labels not sub-second floats: %v", labels)
	}
}

// sgr is one complete SGR escape sequence, the only kind the pane writes.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestTinySizes: at every size down to nothing the pane is exactly w×h
// cells with whole escape sequences, each line's style reset by its end;
// the cursor mark is drawn where its column fits, and the chart (axis and
// labels) only where it has room (three rows below the strip, the label,
// the axis and two columns), the rest left blank.
func TestTinySizes(t *testing.T) {
	r := lipgloss.NewRenderer(nil)
	r.SetColorProfile(termenv.TrueColor) // escape sequences to cut, if any were
	for _, ascii := range []bool{false, true} {
		th := theme.New(r, ascii, false)
		arrow, axis, corner := '▼', '│', '└'
		if ascii {
			arrow, axis, corner = 'v', '|', '+'
		}
		m := New(th)
		for _, sz := range [][2]int{{0, 0}, {1, 1}, {5, 3}, {10, 2}, {8, 4}, {7, 4}, {8, 3}, {6, 6}, {7, 1}, {12, 5}} {
			w, h := sz[0], sz[1]
			m.SetSize(w, h)
			m.SetData(ramp(max(1, m.Columns())), nil)
			m.SetCursor(0)
			v := m.View()
			if w == 0 || h == 0 {
				if v != "" {
					t.Errorf("%dx%d: view %q, want nothing", w, h, v)
				}
				continue
			}
			lines := strings.Split(v, "\n")
			if len(lines) != h {
				t.Fatalf("%dx%d (ascii %v): %d lines:\n%s", w, h, ascii, len(lines), v)
			}
			plain := make([][]rune, h)
			for y, l := range lines {
				bare := sgr.ReplaceAllString(l, "")
				if strings.ContainsRune(bare, '\x1b') {
					t.Fatalf("%dx%d (ascii %v) line %d: a cut escape sequence in %q", w, h, ascii, y, l)
				}
				if seqs := sgr.FindAllString(l, -1); len(seqs) > 0 && seqs[len(seqs)-1] != "\x1b[0m" {
					t.Errorf("%dx%d (ascii %v) line %d: style not reset by the line's end: %q", w, h, ascii, y, l)
				}
				plain[y] = []rune(bare)
				if len(plain[y]) != w || lipgloss.Width(l) != w {
					t.Fatalf("%dx%d (ascii %v) line %d: %d cells (width %d), want %d: %q", w, h, ascii, y, len(plain[y]), lipgloss.Width(l), w, bare)
				}
			}
			x0 := yLabelWidth + 1 // the cursor's column 0
			for x, c := range plain[0] {
				if want := map[bool]rune{true: arrow, false: ' '}[x == x0]; c != want {
					t.Errorf("%dx%d (ascii %v): strip cell %d is %q, want %q: %q", w, h, ascii, x, c, want, string(plain[0]))
				}
			}
			room := h-1 >= 3 && w >= yLabelWidth+3
			for y := 1; y < h; y++ {
				for x, c := range plain[y] {
					blank := c == ' ' || x == x0 && y < h-2 && c == th.G.Cursor
					if !room && !blank {
						t.Errorf("%dx%d (ascii %v): no room for the chart, but cell (%d, %d) is %q:\n%s", w, h, ascii, x, y, c, sgr.ReplaceAllString(v, ""))
					}
				}
			}
			if room {
				top, bottom := plain[1], plain[h-2]
				if top[yLabelWidth] != axis || !strings.HasSuffix(strings.TrimSpace(string(top[:yLabelWidth])), "M") ||
					bottom[yLabelWidth] != corner || strings.TrimSpace(string(plain[h-1])) == "" {
					t.Errorf("%dx%d (ascii %v): no axis, labels or x labels:\n%s", w, h, ascii, sgr.ReplaceAllString(v, ""))
				}
			}
		}
	}
}

// TestStepMarksThinned: steps closer than two columns never touch on the
// marker strip (60 steps in 40 columns would be a solid comb).
func TestStepMarksThinned(t *testing.T) {
	m := New(testTheme(true))
	m.SetSize(46, 10)
	m.SetData(ramp(m.Columns()), nil)
	s := ramp(m.Columns())
	var marks []Marker
	for i := range 60 {
		marks = append(marks, Marker{T: s.T0 + int64(i)*(s.T1-s.T0)/60, Kind: MarkStep})
	}
	m.SetData(s, marks)
	strip := strings.Split(m.View(), "\n")[0]
	if strings.Contains(strip, "::") || strings.Count(strip, ":") < m.Columns()/2-1 {
		t.Fatalf("step strip %q", strip)
	}
}
