package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// retainedStore is a live Store with a 4096-entry window fed 30,000
// entries (one segment, alloc/free pairs 1 ms apart), a restart marker
// in the middle of the window.
func retainedStore(t *testing.T) *store.Store {
	t.Helper()
	clock := func() time.Time { return time.UnixMicro(t0 + 14_000_700) }
	st := store.New(store.Options{Retain: store.Retention{Entries: 4096}, Now: clock})
	if err := st.StartLive(nil, []store.DeviceInfo{{ID: 0, Name: "Ascend910B3"}}); err != nil {
		t.Fatal(err)
	}
	tt := t0
	st.Append(0, []snapshot.TraceEntry{{Action: snapshot.ActionSegmentAlloc, Addr: segA, Size: 20 * mib, TimeUS: tt}})
	var batch []snapshot.TraceEntry
	for i := 0; i < 15000; i++ {
		tt += 1000
		batch = append(batch, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: segA, Size: mib, TimeUS: tt},
			snapshot.TraceEntry{Action: snapshot.ActionFreeCompleted, Addr: segA, Size: mib, TimeUS: tt + 500})
		if len(batch) == 1000 {
			st.Append(0, batch)
			batch = batch[:0]
		}
		if i == 14000 {
			st.Append(0, batch)
			batch = batch[:0]
			st.Restart(0, []snapshot.Segment{{Device: 0, Address: segA, TotalSize: 20 * mib,
				Blocks: []snapshot.Block{{Address: segA, Size: 20 * mib}}}}, 4343)
		}
	}
	st.Append(0, batch)
	return st
}

// TestHeaderSaysWhatWasThinned: the header names the thinned entries and
// where the detail starts, at 120 and at 80 columns; the cursor cannot
// go before the window, and saying so is the status line's job.
func TestHeaderSaysWhatWasThinned(t *testing.T) {
	st := retainedStore(t)
	ri := st.Retained(0)
	if ri.Thinned == 0 {
		t.Fatal("nothing thinned")
	}
	o := testOptions(st)
	o.Live = true
	for _, w := range []int{160, 120, 80} {
		m := newSized(t, o, w, 24)
		v := ansi.Strip(m.View())
		checkFrame(t, m.View(), w, 24)
		want := "history: 24.6 k entries thinned, detail from 07:06:52  allocated"
		if w < 120 {
			want = "24.6 k thinned  entry #30001/30002"
		}
		if !strings.Contains(v, want) {
			t.Fatalf("%d columns: header lacks %q:\n%s", w, want, v)
		}
	}
	m := newSized(t, o, 120, 30)
	press(m, "home")
	if m.cur.cursor != ri.DetailFrom || m.Summary().Thinned || m.Summary().Applied != ri.Thinned {
		t.Fatalf("home: cursor %d (detail from %d), summary %+v", m.cur.cursor, ri.DetailFrom, m.Summary())
	}
	if v := ansi.Strip(m.View()); !strings.Contains(v, "detail before 07:06:52.288 was thinned (--retain)") {
		t.Fatalf("no word on the thinned detail:\n%s", v)
	}
	press(m, "left")
	if m.Summary().Applied != ri.Thinned {
		t.Fatalf("stepped into the thinned part: applied %d", m.Summary().Applied)
	}
}

// TestRestartMarkerShown: the restart marker is on the timeline's marker
// strip and in the event list, with the new pid.
func TestRestartMarkerShown(t *testing.T) {
	st := retainedStore(t)
	at, ok := st.Next(0, -1<<62, store.ActionRestart)
	if !ok {
		t.Fatal("no restart marker in the Store")
	}
	o := testOptions(st)
	o.Live = true
	m := newSized(t, o, 120, 40)
	following := ansi.Strip(m.View()) // the cursor is at the end, not on the mark
	m.setCursor(at)
	v := ansi.Strip(m.View())
	if !strings.Contains(v, "restart        pid 4343") || !strings.Contains(v, "new pro") {
		t.Fatalf("event list lacks the restart:\n%s", v)
	}
	strip := strings.Split(following, "\n")
	found := false
	for _, l := range strip {
		if strings.Contains(l, "↻") {
			found = true
		}
	}
	if !found {
		t.Fatalf("timeline lacks the restart mark ↻:\n%s", v)
	}
}
