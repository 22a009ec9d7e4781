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
	var all []key.Binding
	var names []string
	for _, v := range []reflect.Value{reflect.ValueOf(k), reflect.ValueOf(k.WhatIfView)} {
		for i := 0; i < v.NumField(); i++ {
			if b, ok := v.Field(i).Interface().(key.Binding); ok {
				all = append(all, b)
				names = append(names, v.Type().Field(i).Name)
			}
		}
	}
	if len(all) != reflect.TypeOf(k).NumField()-1+reflect.TypeOf(k.WhatIfView).NumField() {
		t.Fatalf("a field of the key maps is neither a binding nor the what-if view's map")
	}
	for i, b := range all {
		name := names[i]
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
