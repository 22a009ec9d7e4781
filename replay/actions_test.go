package replay

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// actionsJSON is a snapshot whose one device trace holds an entry per
// action name given.
func actionsJSON(names ...string) []byte {
	var b strings.Builder
	b.WriteString(`{"segments": [], "device_traces": [[`)
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"action": %q, "addr": %d, "size": 512, "stream": 0}`, n, 0x1000+i*512)
	}
	b.WriteString(`]]}`)
	return []byte(b.String())
}

// TestDecodesKeepTheirOwnActions: the names of unknown actions belong to
// the decode that saw them. A file with more unknown actions than a table
// holds fills its own table only: a later decode still names its actions,
// and the first decode's names are unchanged by the later one.
func TestDecodesKeepTheirOwnActions(t *testing.T) {
	var many []string
	for i := range 300 {
		many = append(many, fmt.Sprintf("flood_%03d", i))
	}
	decode := func(b []byte) *snapshot.Snapshot {
		t.Helper()
		c, err := Decode(bytes.NewReader(b), int64(len(b)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Snapshot
	}
	flood := decode(actionsJSON(many...))
	if got := flood.ActionName(flood.DeviceTraces[0][0].Action); got != "flood_000" {
		t.Errorf("first unknown action of the flood reads %q", got)
	}
	if last := flood.DeviceTraces[0][299].Action; last != snapshot.ActionOther {
		t.Errorf("the flood's last action is %d (%s), want ActionOther once its table is full", last, flood.ActionName(last))
	}
	mine := decode(actionsJSON("alloc", "vendor_reserve", "free_completed"))
	tr := mine.DeviceTraces[0]
	if tr[0].Action != snapshot.ActionAlloc || tr[2].Action != snapshot.ActionFreeCompleted {
		t.Errorf("known actions: %v %v", tr[0].Action, tr[2].Action)
	}
	if got := mine.ActionName(tr[1].Action); got != "vendor_reserve" {
		t.Errorf("after a flood in another decode, an unknown action reads %q, want vendor_reserve", got)
	}
	if got := flood.ActionName(flood.DeviceTraces[0][0].Action); got != "flood_000" {
		t.Errorf("a later decode renamed the flood's first action to %q", got)
	}
	// Same code, two meanings: each snapshot names its own.
	if tr[1].Action == flood.DeviceTraces[0][0].Action && mine.ActionName(tr[1].Action) == flood.ActionName(tr[1].Action) {
		t.Error("two decodes share one action table")
	}
}
