package snapshot

import (
	"fmt"
	"reflect"
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

// A replay holds one TraceEntry per trace entry of the file: its size is
// most of a loaded capture's memory, and a pointer in it would make the
// collector scan every trace.
func TestTraceEntryIsSmallAndFlat(t *testing.T) {
	if n := unsafe.Sizeof(TraceEntry{}); n > 72 {
		t.Errorf("TraceEntry is %d bytes, want at most 72 (order the small fields first)", n)
	}
	var flat func(reflect.Type) bool
	flat = func(t reflect.Type) bool {
		switch t.Kind() {
		case reflect.Pointer, reflect.String, reflect.Slice, reflect.Map, reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
			return false
		case reflect.Struct:
			for i := range t.NumField() {
				if !flat(t.Field(i).Type) {
					return false
				}
			}
		case reflect.Array:
			return flat(t.Elem())
		}
		return true
	}
	if !flat(reflect.TypeFor[TraceEntry]()) {
		t.Error("TraceEntry holds a pointer (a string, slice, …): keep strings in the snapshot's Texts")
	}
}

func TestTextTable(t *testing.T) {
	tt := NewTextTable()
	a, b := tt.Intern("N/A"), tt.Intern("ctx")
	if a == NoText || b == a || tt.Intern("N/A") != a || tt.Intern("") != NoText {
		t.Fatalf("ids: %d %d", a, b)
	}
	if tt.Text(a) != "N/A" || tt.Text(b) != "ctx" || tt.Text(NoText) != "" || tt.Text(99) != "" || tt.Len() != 3 {
		t.Error("texts")
	}
	var none *TextTable
	if none.Text(a) != "" || none.Len() != 1 {
		t.Error("nil table")
	}
}
