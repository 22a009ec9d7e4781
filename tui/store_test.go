package tui

import (
	"strconv"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

func storeOf(t testing.TB, snap *snapshot.Snapshot, ops []store.Op) *store.Store {
	t.Helper()
	st := store.New(store.Options{})
	if err := st.IngestSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	st.IngestOps(ops)
	return st
}

// TestStoreAndFakeAgree drives the app on the real Store and on the naive
// fake with the same keys: what the header and panes say must match.
func TestStoreAndFakeAgree(t *testing.T) {
	for _, timed := range []bool{true, false} {
		fake := newSized(t, testOptions(newFakeSource(smallSnapshot(timed), smallOps())), 160, 48)
		real := newSized(t, testOptions(storeOf(t, smallSnapshot(timed), smallOps())), 160, 48)
		for _, k := range []string{"", "g", "right", "right", "right", "right", "right", "right", "right", "o", "esc", "p", "G", "left"} {
			if k != "" {
				press(fake, k)
				press(real, k)
			}
			fs, rs := fake.Summary(), real.Summary()
			if fake.Cursor() != real.Cursor() || fs.Applied != rs.Applied || fs.ActiveBytes != rs.ActiveBytes ||
				fs.ReservedBytes != rs.ReservedBytes || fs.OOMs != rs.OOMs {
				t.Fatalf("timed=%v after %q: fake cursor %d %+v\nstore cursor %d %+v", timed, k, fake.Cursor(), fs, real.Cursor(), rs)
			}
			if k == "o" {
				continue // the OOM panel: its holders need the Store (TestOOMPanel)
			}
			fv, rv := strings.Split(fake.View(), "\n"), strings.Split(real.View(), "\n")
			// Segment map and events (rows 18..30) must be identical.
			for i := 18; i < 30; i++ {
				if fv[i] != rv[i] {
					t.Fatalf("timed=%v after %q, row %d differs:\nfake  %q\nstore %q", timed, k, i, fv[i], rv[i])
				}
			}
		}
	}
}

// TestJumpToEntryWithTies: in the real fixture several entries share a
// microsecond; #N lands on the time of entry N (all entries of that
// microsecond applied).
func TestJumpToEntryWithTies(t *testing.T) {
	m := newSized(t, fixtureOptions(fixtureSource(t)), 120, 40)
	for _, n := range []int64{0, 1, 2, 2500, 5162} {
		press(m, "t")
		typeText(m, "#"+strconv.FormatInt(n, 10))
		press(m, "enter")
		ev := m.o.Source.EventsAround(0, m.Cursor(), 1, 0)
		if len(ev) == 0 || ev[0].Seq < n || m.Summary().Applied <= n {
			t.Fatalf("#%d: cursor %d applied %d", n, m.Cursor(), m.Summary().Applied)
		}
		if prev := m.o.Source.EventsAround(0, m.Cursor()-1, 1, 0); len(prev) > 0 && prev[0].Seq >= n {
			t.Fatalf("#%d: cursor %d is not the earliest time applying entry %d", n, m.Cursor(), n)
		}
	}
}
