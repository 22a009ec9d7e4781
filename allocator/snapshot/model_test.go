package snapshot

import (
	"fmt"
	"reflect"
	"sync"
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

// Tables are shared by a decoder and the readers of what it decoded: every
// goroutine that interns a string gets its one id.
func TestTablesConcurrent(t *testing.T) {
	tt, at := NewTextTable(), NewActionTable()
	ids := make([][2][]uint32, 4)
	var wg sync.WaitGroup
	for g := range ids {
		wg.Go(func() {
			for i := range 50 {
				s := fmt.Sprint("s", (i*7+g)%50)
				ids[g][0] = append(ids[g][0], uint32(tt.Intern(s)))
				ids[g][1] = append(ids[g][1], uint32(at.Parse(s)))
				_ = tt.Text(TextID(i)) + at.Name(Action(i))
			}
		})
	}
	wg.Wait()
	for g := range ids {
		for i := range 50 {
			s := fmt.Sprint("s", (i*7+g)%50)
			if tt.Text(TextID(ids[g][0][i])) != s || at.Name(Action(ids[g][1][i])) != s {
				t.Fatalf("goroutine %d: %q got text %q, action %q", g, s, tt.Text(TextID(ids[g][0][i])), at.Name(Action(ids[g][1][i])))
			}
		}
	}
	if tt.Len() != 51 || at.Len() != 50 {
		t.Fatalf("lengths %d %d", tt.Len(), at.Len())
	}
}
