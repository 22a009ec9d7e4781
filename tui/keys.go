package tui

import (
	"github.com/charmbracelet/bubbles/key"

	tuiwhatif "github.com/npumon/npumon/tui/whatif"
)

// keyMap lists every binding; help is generated from it.
type keyMap struct {
	Play, Prev, Next, BigPrev, BigNext, Slower, Faster, Start, End, NextOOM, Peak, Jump, Follow key.Binding
	ZoomIn, ZoomOut, PanLeft, PanRight, ZoomReset                                               key.Binding
	Tab, BackTab, Pane1, Pane2, Pane3, Pane4, Up, Down, Enter, Sort                             key.Binding
	Filter, Device, Relative, Help, Back, Quit                                                  key.Binding
	Captures, WhatIf, Devices                                                                   key.Binding
	PageUp, PageDown, Home, EndList, NextMatch, PrevMatch                                       key.Binding
	Holders, Stack, Unfold, Mark, GroupBy, CatChart                                             key.Binding

	// WhatIfView are the what-if view's own keys (tui/whatif), listed in help.
	WhatIfView tuiwhatif.KeyMap
}

func newKeyMap() keyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return keyMap{
		Play:      b([]string{" "}, "space", "play/pause"),
		Prev:      b([]string{"left"}, "←", "previous event"),
		Next:      b([]string{"right"}, "→", "next event"),
		BigPrev:   b([]string{"shift+left"}, "shift+←", "step back 1/20 of view"),
		BigNext:   b([]string{"shift+right"}, "shift+→", "step forward 1/20 of view"),
		Slower:    b([]string{"["}, "[", "slower"),
		Faster:    b([]string{"]"}, "]", "faster"),
		Start:     b([]string{"g"}, "g", "start"),
		End:       b([]string{"G"}, "G", "end"),
		NextOOM:   b([]string{"o"}, "o", "next OOM: its panel"),
		Peak:      b([]string{"p"}, "p", "peak"),
		Jump:      b([]string{"t"}, "t", "jump to time"),
		Follow:    b([]string{"f"}, "f", "follow live"),
		ZoomIn:    b([]string{"+", "="}, "+", "zoom in"),
		ZoomOut:   b([]string{"-", "_"}, "-", "zoom out"),
		PanLeft:   b([]string{"<", ","}, "<", "pan left"),
		PanRight:  b([]string{">", "."}, ">", "pan right"),
		ZoomReset: b([]string{"0"}, "0", "whole range"),
		Tab:       b([]string{"tab"}, "tab", "next pane"),
		BackTab:   b([]string{"shift+tab"}, "shift+tab", "previous pane"),
		Pane1:     b([]string{"1"}, "1", "timeline"),
		Pane2:     b([]string{"2"}, "2", "segments"),
		Pane3:     b([]string{"3"}, "3", "events"),
		Pane4:     b([]string{"4"}, "4", "ops"),
		Up:        b([]string{"up", "k"}, "↑/k", "select up"),
		Down:      b([]string{"down", "j"}, "↓/j", "select down"),
		Enter:     b([]string{"enter"}, "enter", "open block / go to op"),
		Sort:      b([]string{"s"}, "s", "sort segments / ops"),
		Filter:    b([]string{"/"}, "/", "filter"),
		Device:    b([]string{"d"}, "d", "next device"),
		Relative:  b([]string{"r"}, "r", "clock/relative time"),
		Help:      b([]string{"?"}, "?", "help"),
		Back:      b([]string{"esc"}, "esc", "back"),
		Quit:      b([]string{"q", "ctrl+c"}, "q", "quit"),
		Captures:  b([]string{"c"}, "c", "captures (watch)"),
		WhatIf:    b([]string{"w"}, "w", "what-if: other allocator settings (snapshots)"),
		PageUp:    b([]string{"pgup"}, "pgup", "page up (lists; events: a page of entries)"),
		PageDown:  b([]string{"pgdown"}, "pgdn", "page down"),
		Home:      b([]string{"home"}, "home", "first row (lists) / start"),
		EndList:   b([]string{"end"}, "end", "last row (lists) / end"),
		NextMatch: b([]string{"n"}, "n", "next entry matching the filter"),
		PrevMatch: b([]string{"N"}, "N", "previous match"),
		Devices:   b([]string{"D"}, "D", "NPUs (npu-smi)"),
		Holders:   b([]string{"h"}, "h", "holders: who holds memory"),
		Stack:     b([]string{"v"}, "v", "view the whole stack"),
		Unfold:    b([]string{"x"}, "x", "stack: unfold / fold library and native frames"),
		Mark:      b([]string{"m"}, "m", "mark A (holders: change)"),
		GroupBy:   b([]string{"b"}, "b", "holders: group by"),
		CatChart:  b([]string{"C"}, "C", "timeline: stacked by memory category"),

		WhatIfView: tuiwhatif.DefaultKeyMap(),
	}
}

// ShortHelp is the one-line hint bar.
func (k keyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.Help, k.Quit, k.Play, k.Prev, k.Next, k.Tab, k.Filter, k.Jump, k.Enter}
}

// FullHelp is the help screen, one column per group.
func (k keyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Play, k.Prev, k.Next, k.BigPrev, k.BigNext, k.Slower, k.Faster, k.Start, k.End},
		{k.NextOOM, k.Peak, k.Jump, k.Follow, k.ZoomIn, k.ZoomOut, k.PanLeft, k.PanRight, k.ZoomReset},
		{k.Tab, k.BackTab, k.Pane1, k.Pane2, k.Pane3, k.Pane4, k.Up, k.Down, k.PageUp, k.PageDown, k.Home, k.EndList, k.Enter},
		{k.Sort, k.Filter, k.NextMatch, k.PrevMatch, k.Device, k.Relative, k.Captures, k.WhatIf, k.Devices, k.Help, k.Back, k.Quit},
		{k.Holders, k.GroupBy, k.Mark, k.Stack, k.Unfold, k.CatChart},
		k.WhatIfView.ShortHelp(),
	}
}
