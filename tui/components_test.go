package tui

import (
	"reflect"
	"testing"
)

// TestModelHoldsRouting: the root Model keeps routing and layout state
// and its components; a new piece of pane or view state goes into the
// component it belongs to, not into the Model (docs/architecture.md).
func TestModelHoldsRouting(t *testing.T) {
	const most = 15
	if n := reflect.TypeFor[Model]().NumField(); n > most {
		t.Errorf("tui.Model has %d fields, more than %d: put the new state into its component", n, most)
	}
}
