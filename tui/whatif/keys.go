package whatif

import "github.com/charmbracelet/bubbles/key"

// KeyMap is the what-if view's key bindings; the screen that opens the
// view lists them in its help (`?`) and its key table.
type KeyMap struct {
	Up, Down, Device, Close key.Binding
}

// DefaultKeyMap is the bindings the view starts with.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "select the run above")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "select the run below")),
		Device: key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "next device (what-if)")),
		Close:  key.NewBinding(key.WithKeys("esc", "w"), key.WithHelp("esc/w", "close the what-if view")),
	}
}

// ShortHelp lists the bindings (help.KeyMap).
func (k KeyMap) ShortHelp() []key.Binding { return []key.Binding{k.Up, k.Down, k.Device, k.Close} }

// FullHelp is ShortHelp as one column (help.KeyMap).
func (k KeyMap) FullHelp() [][]key.Binding { return [][]key.Binding{k.ShortHelp()} }
