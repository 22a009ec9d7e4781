package tui

import (
	"reflect"
	"strings"
	"testing"

	"github.com/charmbracelet/bubbles/key"
)

// TestKeyTableListsEveryBinding: every binding of the key map is on the help
// screen, and so in the generated key table of docs/tui.md.
func TestKeyTableListsEveryBinding(t *testing.T) {
	k := newKeyMap()
	inHelp := map[string]bool{}
	for _, g := range k.FullHelp() {
		for _, b := range g {
			inHelp[b.Help().Desc] = true
		}
	}
	table := KeyTable()
	v := reflect.ValueOf(k)
	for i := 0; i < v.NumField(); i++ {
		b := v.Field(i).Interface().(key.Binding)
		name := v.Type().Field(i).Name
		if !inHelp[b.Help().Desc] {
			t.Errorf("binding %s (%q) is not on the help screen", name, b.Help().Desc)
		}
		if !strings.Contains(table, "| "+keyList(b)+" | "+b.Help().Desc+" |") {
			t.Errorf("binding %s is not in the key table", name)
		}
	}
	if !strings.Contains(table, "| Cursor and playback | `space` | play/pause |") {
		t.Errorf("key table:\n%s", table)
	}
}
