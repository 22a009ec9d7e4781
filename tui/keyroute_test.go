package tui

import (
	"testing"

	"github.com/charmbracelet/bubbles/key"
)

// TestRouteBindingsInHelp: every binding the route dispatches on is one
// the help screen (and so docs/tui.md) lists, and the main screen binds
// each key once.
func TestRouteBindingsInHelp(t *testing.T) {
	k := newKeyMap()
	inHelp := map[string]bool{}
	for _, g := range k.FullHelp() {
		for _, b := range g {
			inHelp[b.Help().Key+"\x00"+b.Help().Desc] = true
		}
	}
	var bound []key.Binding
	for _, l := range keyRoute {
		if l.key != nil {
			bound = append(bound, l.key(&k))
		}
	}
	for _, b := range mainKeys {
		bound = append(bound, b.key(&k))
	}
	seen := map[string]string{}
	for _, b := range bound {
		if !inHelp[b.Help().Key+"\x00"+b.Help().Desc] {
			t.Errorf("%s (%s) is bound but not in the help", b.Help().Key, b.Help().Desc)
		}
		for _, s := range b.Keys() {
			if d, ok := seen[s]; ok {
				t.Errorf("%q bound twice: %s and %s", s, d, b.Help().Desc)
			}
			seen[s] = b.Help().Desc
		}
	}
	if len(mainKeys) < 30 {
		t.Errorf("only %d main-screen bindings", len(mainKeys))
	}
}
