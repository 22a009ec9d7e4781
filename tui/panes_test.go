package tui

import (
	"testing"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// Every key a pane acts on while focused is on the help screen, and each
// of them is one the pane takes (update says so).
func TestPaneKeysInHelp(t *testing.T) {
	m := small(t, 160, 48)
	inHelp := map[string]bool{}
	for _, g := range m.keys.FullHelp() {
		for _, b := range g {
			inHelp[b.Help().Key+" "+b.Help().Desc] = true
		}
	}
	for p, pn := range m.panels() {
		t.Run(paneNames[p], func(t *testing.T) {
			m.p.focus = pane(p)
			for _, b := range pn.keyMap(&m.keys) {
				if !inHelp[b.Help().Key+" "+b.Help().Desc] {
					t.Errorf("%s is not on the help screen", b.Help().Key)
				}
				if b.Help().Key == m.keys.NextMatch.Help().Key || b.Help().Key == m.keys.PrevMatch.Help().Key {
					continue // n/N act on the filter, with any pane focused
				}
				msg := keyMsg(b.Keys()[0])
				if _, ok := pn.update(m.paneCtx(), msg); !ok {
					t.Errorf("%s pane does not take %s", paneNames[p], b.Help().Key)
				}
			}
			if _, ok := pn.update(m.paneCtx(), tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("x")}); ok {
				t.Errorf("%s pane takes x", paneNames[p])
			}
		})
	}
}

// The panes are offered a key before the screen's bindings (route): no
// pane may take a key that one of the screen's bindings names, or that
// binding would be shadowed while the pane has focus.
func TestPanesShadowNoScreenKey(t *testing.T) {
	m := small(t, 160, 48)
	k := &m.keys
	paneKeys := map[string]bool{}
	for _, b := range []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.Enter, k.Sort} {
		paneKeys[b.Help().Key] = true
	}
	groups := k.FullHelp()
	for p, pn := range m.panels() {
		for _, g := range groups[:len(groups)-1] { // the last group is the what-if view's own
			for _, b := range g {
				if paneKeys[b.Help().Key] {
					continue
				}
				for _, s := range b.Keys() {
					if _, ok := pn.update(m.paneCtx(), keyMsg(s)); ok {
						t.Errorf("%s pane takes %q, bound to %q", paneNames[p], s, b.Help().Desc)
					}
				}
			}
		}
	}
}
