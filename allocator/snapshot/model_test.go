package snapshot

import (
	"fmt"
	"testing"
	"unsafe"
)

func TestActionTable(t *testing.T) {
	a, b := NewActionTable(), NewActionTable()
	x := a.Parse("vendor_x")
	y := b.Parse("vendor_y")
	if x != y {
		t.Fatalf("first unknown action codes differ: %d %d", x, y)
	}
	if a.Name(x) != "vendor_x" || b.Name(y) != "vendor_y" {
		t.Errorf("names: %q %q", a.Name(x), b.Name(y))
	}
	if a.Parse("alloc") != ActionAlloc || a.Len() != 1 {
		t.Errorf("known action registered: len %d", a.Len())
	}
	var none *ActionTable
	if none.Parse("vendor_x") != ActionOther || none.Name(x) != "other" || none.Name(ActionOOM) != "oom" {
		t.Error("nil table")
	}
	for i := range 2 * maxActions {
		a.Parse(fmt.Sprint("n", i))
	}
	if a.Parse("one_more") != ActionOther || a.Name(x) != "vendor_x" {
		t.Error("a full table")
	}
}

// A replay holds one TraceEntry per trace entry of the file; its size is
// most of a loaded capture's memory.
func TestTraceEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(TraceEntry{}); n > 96 {
		t.Errorf("TraceEntry is %d bytes, want at most 96 (order the small fields first)", n)
	}
}
