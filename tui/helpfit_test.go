package tui

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"
)

// TestHelpNeverCutsABinding: at every size from 80×24 up, scrolling the
// help screen (?) from top to bottom shows every binding — the main
// screen's and the what-if view's — with its whole description on one
// line after its key: nothing is cut at the screen's edge ("w what-if:
// other alloc", "n next entry matching" at 80 columns before).
func TestHelpNeverCutsABinding(t *testing.T) {
	for _, sz := range [][2]int{{80, 24}, {100, 30}, {120, 40}, {160, 48}} {
		t.Run(fmt.Sprintf("%dx%d", sz[0], sz[1]), func(t *testing.T) {
			m := newSized(t, testOptions(smallWithOps(t)), sz[0], sz[1])
			press(m, "?")
			var seen []string
			for range 100 {
				v := m.View()
				checkFrame(t, v, sz[0], sz[1])
				seen = append(seen, strings.Split(ansi.Strip(v), "\n")...)
				if !strings.Contains(v, "scroll") || m.vw.help.top >= len(m.vw.help.text(m.paneCtx()))-m.vw.help.page(m.paneCtx()) {
					break
				}
				press(m, "pgdown")
			}
			screen := strings.Join(seen, "\n")
			var all []key.Binding
			for _, g := range m.keys.FullHelp() {
				all = append(all, g...)
			}
			for _, b := range all {
				h := b.Help()
				re := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(h.Key) + ` +` + regexp.QuoteMeta(h.Desc) + `(\s|$)`)
				if !re.MatchString(screen) {
					t.Errorf("help at %dx%d never shows %q %q whole:\n%s", sz[0], sz[1], h.Key, h.Desc, screen)
				}
			}
			// no help line is wider than the screen (none left to the cut)
			for _, l := range m.vw.help.text(m.paneCtx()) {
				if w := ansi.StringWidth(l); w > sz[0] {
					t.Errorf("help line %d wide at %d columns: %q", w, sz[0], ansi.Strip(l))
				}
			}
		})
	}
}
