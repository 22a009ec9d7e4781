package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
)

// keyGroupNames names the columns of the help screen (keyMap.FullHelp), in
// order, for the key table in the documentation.
var keyGroupNames = []string{"Cursor and playback", "Jumps and zoom", "Panes and selection", "Views", "Explain", "What-if view"}

// KeyTable renders every key binding of the terminal UI as a Markdown table,
// grouped as the help screen (`?`) groups them. docs/tui.md embeds it;
// `npumon gendocs` regenerates it from the key map, so the documentation
// lists exactly the keys the program binds.
func KeyTable() string {
	k := newKeyMap()
	groups := k.FullHelp()
	if len(groups) != len(keyGroupNames) {
		panic(fmt.Sprintf("tui: %d help groups but %d group names", len(groups), len(keyGroupNames)))
	}
	var b strings.Builder
	b.WriteString("| group | keys | action |\n|---|---|---|\n")
	for i, g := range groups {
		for j, kb := range g {
			name := ""
			if j == 0 {
				name = keyGroupNames[i]
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", name, keyList(kb), kb.Help().Desc)
		}
	}
	return b.String()
}

// keyList writes a binding's keys as Markdown code spans, the way a user
// types them: `space`, `←`, `shift+←`.
func keyList(kb key.Binding) string {
	var names []string
	for _, s := range kb.Keys() {
		names = append(names, "`"+keyName(s)+"`")
	}
	return strings.Join(names, " ")
}

func keyName(s string) string {
	switch s {
	case " ":
		return "space"
	case "left":
		return "←"
	case "right":
		return "→"
	case "up":
		return "↑"
	case "down":
		return "↓"
	case "shift+left":
		return "shift+←"
	case "shift+right":
		return "shift+→"
	case "pgdown":
		return "pgdn"
	case "|":
		return `\|`
	}
	return s
}
