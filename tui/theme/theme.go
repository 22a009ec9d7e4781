// Package theme holds the one set of glyphs and lipgloss styles every npumon
// pane draws with, built from a renderer so colour follows the terminal (and
// NO_COLOR / --ascii turn it off while glyphs keep every state readable).
package theme

import (
	"strings"
	"sync"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Glyphs are the characters that carry meaning without colour.
type Glyphs struct {
	Allocated, Pending, Slack, Free rune // segment map block states
	Reserved, Active, AllocArea     rune // timeline areas
	Cursor, Step, OOM, Highlight    rune // timeline marker strip
	Restart                         rune // timeline marker strip: a producer restart or resync
	Selected                        string
	VBar, HBar                      string
	Ellipsis                        string
}

var unicodeGlyphs = Glyphs{
	Allocated: '█', Pending: '▒', Slack: '░', Free: '·',
	Reserved: '░', Active: '▒', AllocArea: '█',
	Cursor: '│', Step: '┆', OOM: '✗', Highlight: '━', Restart: '↻',
	Selected: "▶", VBar: "│", HBar: "─", Ellipsis: "…",
}

var asciiGlyphs = Glyphs{
	Allocated: '#', Pending: '%', Slack: '-', Free: '.',
	Reserved: '.', Active: '+', AllocArea: '#',
	Cursor: '|', Step: ':', OOM: 'X', Highlight: '=', Restart: 'R',
	Selected: ">", VBar: "|", HBar: "-", Ellipsis: "~",
}

// Theme bundles glyphs and styles.
type Theme struct {
	ASCII bool
	Color bool // false under NO_COLOR or an ASCII colour profile
	G     Glyphs

	Header, Mode, Warn, Dim, Title, TitleFocused, Selected, Hint, Key lipgloss.Style
	Allocated, Pending, Slack, Free                                   lipgloss.Style
	Reserved, Active, AllocArea, CursorCol, Marker, HighlightCol      lipgloss.Style
	// BlockPalette alternates colours of neighbouring allocated blocks.
	BlockPalette []lipgloss.Style

	mu    sync.Mutex
	wraps map[*lipgloss.Style][2]string
}

// Wrap writes text styled by st to sb. The escape sequences around a
// style's output are computed once per style (by rendering a marker), so a
// run costs two string writes instead of a lipgloss Render. Only for styles
// without padding, borders or widths — colours and attributes.
func (t *Theme) Wrap(sb *strings.Builder, st *lipgloss.Style, text string) {
	if !t.Color {
		sb.WriteString(text)
		return
	}
	t.mu.Lock()
	w, ok := t.wraps[st]
	if !ok {
		if t.wraps == nil {
			t.wraps = map[*lipgloss.Style][2]string{}
		}
		const mark = "\x01"
		out := st.Render(mark)
		if i := strings.Index(out, mark); i >= 0 {
			w = [2]string{out[:i], out[i+len(mark):]}
		}
		t.wraps[st] = w
	}
	t.mu.Unlock()
	sb.WriteString(w[0])
	sb.WriteString(text)
	sb.WriteString(w[1])
}

// New builds a theme. noColor forces the ASCII colour profile on r.
func New(r *lipgloss.Renderer, ascii, noColor bool) *Theme {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	if noColor {
		r.SetColorProfile(termenv.Ascii)
	}
	t := &Theme{ASCII: ascii, Color: r.ColorProfile() != termenv.Ascii, G: unicodeGlyphs}
	if ascii {
		t.G = asciiGlyphs
	}
	s := r.NewStyle
	c := func(light, dark string) lipgloss.AdaptiveColor {
		return lipgloss.AdaptiveColor{Light: light, Dark: dark}
	}
	t.Header = s().Bold(true)
	t.Mode = s().Bold(true).Foreground(c("#005f00", "#5fff87"))
	t.Warn = s().Bold(true).Foreground(c("#af0000", "#ff5f5f"))
	t.Dim = s().Foreground(c("#808080", "#808080"))
	t.Title = s().Foreground(c("#808080", "#a8a8a8"))
	t.TitleFocused = s().Bold(true).Foreground(c("#005faf", "#5fafff"))
	t.Selected = s().Reverse(true)
	t.Hint = s().Foreground(c("#808080", "#8a8a8a"))
	t.Key = s().Bold(true)
	t.Allocated = s().Foreground(c("#0087af", "#5fafd7"))
	t.Pending = s().Foreground(c("#d70000", "#ff5f5f"))
	t.Slack = s().Foreground(c("#d75f00", "#ff8700"))
	t.Free = s().Foreground(c("#a8a8a8", "#585858"))
	t.Reserved = s().Foreground(c("#a8a8a8", "#6c6c6c"))
	t.Active = s().Foreground(c("#d78700", "#ffaf00"))
	t.AllocArea = s().Foreground(c("#0087af", "#5fafd7"))
	t.CursorCol = s().Bold(true).Foreground(c("#000000", "#ffffff"))
	t.Marker = s().Foreground(c("#5f5f87", "#8787af"))
	t.HighlightCol = s().Foreground(c("#008700", "#87d787"))
	for _, col := range []string{"#4e79a7", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"} {
		t.BlockPalette = append(t.BlockPalette, s().Foreground(lipgloss.Color(col)))
	}
	return t
}
