package tui

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

// dirCaptures stands in for npumon watch's directory: captures in arrival
// order, each opened by ingesting its snapshot into the one Store.
type dirCaptures struct {
	mu    sync.Mutex
	st    *store.Store
	list  []capture.Entry
	snaps map[string]*snapshot.Snapshot
	opens []string
}

func (d *dirCaptures) add(path string, snap *snapshot.Snapshot, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.list = append(d.list, capture.Entry{Index: len(d.list) + 1, Path: path, Kind: capture.Snapshot, Arrived: at, Size: 1000 + int64(len(d.list))})
	d.snaps[path] = snap
}

func (d *dirCaptures) List() []capture.Entry {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]capture.Entry(nil), d.list...)
}

func (d *dirCaptures) Open(path string) error {
	d.mu.Lock()
	snap := d.snaps[path]
	d.opens = append(d.opens, path)
	d.mu.Unlock()
	if snap == nil {
		return errors.New(path + ": truncated pickle")
	}
	if err := d.st.IngestSnapshot(snap); err != nil {
		return err
	}
	d.mu.Lock()
	for i := range d.list {
		d.list[i].Open = d.list[i].Path == path
	}
	d.mu.Unlock()
	return nil
}

// TestCapturePicker: c lists the captures in arrival order with time and
// size, a capture landing while it is shown appears, enter opens the
// selected one (the Store now holds it, the header names it), a capture
// that fails to open says why and keeps the picker, esc closes it.
func TestCapturePicker(t *testing.T) {
	big, err := replay.DecodeFile(fixturePath(t), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	caps := &dirCaptures{st: st, snaps: map[string]*snapshot.Snapshot{}}
	caps.add("/dumps/snapshot_1.pickle", smallSnapshot(true), fixedNow)
	if err := caps.Open("/dumps/snapshot_1.pickle"); err != nil {
		t.Fatal(err)
	}
	o := testOptions(st)
	o.SourceName, o.Live, o.Captures = "/dumps", true, caps
	m := newSized(t, o, 120, 30)
	tick := func() { m.Update(tickMsg(fixedNow)) }
	tick()
	v := m.View()
	if !strings.Contains(v, "/dumps · snapshot_1.pickle (1 of 1)") || !strings.Contains(v, "entry #8/9") {
		t.Fatalf("header does not name the open capture:\n%s", v)
	}
	if !strings.Contains(v, "c captures") {
		t.Fatalf("hint bar lacks the picker key:\n%s", v)
	}
	press(m, "c")
	v = m.View()
	if !strings.Contains(v, "Captures in /dumps") || !strings.Contains(v, "snapshot_1.pickle") || !strings.Contains(v, "12:00:00.000") ||
		!strings.Contains(v, "1000 B") || !strings.Contains(v, "(open)") {
		t.Fatalf("picker:\n%s", v)
	}
	// a new dump lands while the picker is shown
	caps.add("/dumps/snapshot_2.pickle", big.Snapshot, fixedNow.Add(1500*time.Millisecond))
	caps.add("/dumps/oom_snapshot_3.pickle", nil, fixedNow.Add(3*time.Second))
	tick()
	v = m.View()
	i1, i2, i3 := strings.Index(v, "snapshot_1.pickle  "), strings.Index(v, "snapshot_2.pickle"), strings.Index(v, "oom_snapshot_3.pickle")
	if i1 < 0 || i2 < 0 || i3 < 0 || !(i1 < i2 && i2 < i3) || !strings.Contains(v, "12:00:01.500") {
		t.Fatalf("new captures not listed in arrival order:\n%s", v)
	}
	// the broken one: an error, the picker stays
	press(m, "down", "down")
	cmd := press(m, "enter")
	if cmd == nil {
		t.Fatal("enter started nothing")
	}
	m.Update(cmd())
	if v = m.View(); !strings.Contains(v, "truncated pickle") || !m.vw.pick.shown {
		t.Fatalf("a failed open:\n%s", v)
	}
	press(m, "up")
	cmd = press(m, "enter")
	m.Update(cmd())
	tick()
	v = m.View()
	if m.vw.pick.shown || !strings.Contains(v, "/dumps · snapshot_2.pickle (2 of 3)") || !strings.Contains(v, "entry #5162/5163") {
		t.Fatalf("after opening snapshot_2:\n%s", v)
	}
	if m.Summary().Entries != 5163 {
		t.Fatalf("summary %+v", m.Summary())
	}
	if want := []string{"/dumps/snapshot_1.pickle", "/dumps/oom_snapshot_3.pickle", "/dumps/snapshot_2.pickle"}; strings.Join(caps.opens, ",") != strings.Join(want, ",") {
		t.Fatalf("opened %v", caps.opens)
	}
	// reopened, the picker starts on the open capture; esc closes it
	press(m, "c")
	if m.vw.pick.sel != 1 {
		t.Fatalf("picker selection %d, want the open capture (1)", m.vw.pick.sel)
	}
	press(m, "esc")
	if m.vw.pick.shown {
		t.Fatal("esc did not close the picker")
	}
}

// TestCapturePickerAt80: at 80 columns long names give way from the
// middle (what they are and which one both stay), a failed capture's
// error starts after its name and shows whole on the bottom line while
// it is selected, and no row is wider than the screen.
func TestCapturePickerAt80(t *testing.T) {
	st := store.New(store.Options{})
	caps := &dirCaptures{st: st, snaps: map[string]*snapshot.Snapshot{}}
	caps.add("/dumps/oom_snapshot_25713_20261201174035123456.pickle", nil, fixedNow)
	caps.add("/dumps/vm_25713_20261201174035813_ascend_pt_and_more", smallSnapshot(true), fixedNow)
	caps.list[0].Error = "/dumps/oom_snapshot_25713_20261201174035123456.pickle: offset 4711: unexpected end of file (truncated?)"
	o := testOptions(st)
	o.SourceName, o.Live, o.Captures = "/dumps", true, caps
	m := newSized(t, o, 80, 24)
	m.Update(tickMsg(fixedNow))
	press(m, "c", "up") // the broken one
	v := m.View()
	for _, want := range []string{"oom_snaps…456.pickle  offset 4711", "vm_25713_2026", "pt_and_more",
		"oom_snapshot_2…35123456.pickle: offset 4711: unexpected end of file (truncated?)"} {
		if !strings.Contains(v, want) {
			t.Errorf("picker at 80 columns lacks %q:\n%s", want, v)
		}
	}
	checkFrame(t, v, 80, 24)
}

// TestCapturePickerOnlyWhenWatching: without Options.Captures, c opens no
// picker but says what it is for, and the header is the source name alone.
func TestCapturePickerOnlyWhenWatching(t *testing.T) {
	m := newSized(t, testOptions(storeOf(t, smallSnapshot(true), nil)), 120, 30)
	press(m, "c")
	if v := m.View(); m.vw.pick.shown || strings.Contains(v, "Captures in") || !strings.Contains(v, "c lists the captures of a watched directory") {
		t.Fatalf("picker without captures:\n%s", v)
	}
	if !strings.HasPrefix(strings.TrimSpace(strings.Split(m.View(), "\n")[0]), "npumon  │  small.pickle  │") {
		t.Fatalf("header: %q", strings.Split(m.View(), "\n")[0])
	}
}

// TestCapturePickerNumbers: the picker and the header show each capture's
// own number (the one watch --list prints and --open N takes), not its row:
// a capture removed meanwhile has none ("-") and is not counted.
func TestCapturePickerNumbers(t *testing.T) {
	st := store.New(store.Options{})
	caps := &dirCaptures{st: st, snaps: map[string]*snapshot.Snapshot{}}
	caps.add("/dumps/b.pickle", smallSnapshot(true), fixedNow)
	caps.add("/dumps/c.pickle", smallSnapshot(true), fixedNow.Add(time.Second))
	caps.add("/dumps/gone.pickle", nil, fixedNow.Add(-time.Second))
	caps.list[2].Index, caps.list[2].Error = 0, "removed"
	if err := caps.Open("/dumps/c.pickle"); err != nil {
		t.Fatal(err)
	}
	o := testOptions(st)
	o.SourceName, o.Live, o.Captures = "/dumps", true, caps
	m := newSized(t, o, 120, 30)
	m.Update(tickMsg(fixedNow))
	if v := m.View(); !strings.Contains(v, "/dumps · c.pickle (2 of 2)") {
		t.Fatalf("header:\n%s", v)
	}
	press(m, "c")
	v := m.View()
	for _, want := range []string{"   1  snapshot  ", "*   2  snapshot  ", "   -  snapshot  "} {
		if !strings.Contains(v, want) {
			t.Errorf("picker lacks %q:\n%s", want, v)
		}
	}
}

// TestWaitingSaysCapturesBroken: a watched directory whose captures all
// fail to read says so, with the first error, instead of "waiting for
// data…"; one whose captures are still being written says that.
func TestWaitingSaysCapturesBroken(t *testing.T) {
	st := store.New(store.Options{})
	caps := &dirCaptures{st: st, snaps: map[string]*snapshot.Snapshot{}}
	for _, n := range []string{"a", "b", "c"} {
		caps.add("/dumps/"+n+".pickle", nil, fixedNow)
	}
	for i := range caps.list {
		caps.list[i].Error = caps.list[i].Path + ": pickle does not end with STOP"
	}
	o := testOptions(st)
	o.SourceName, o.Live, o.Captures = "/dumps", true, caps
	m := newSized(t, o, 120, 30)
	m.Update(tickMsg(fixedNow))
	v := m.View()
	if strings.Contains(v, "waiting for data") || !strings.Contains(v, "3 captures, all unreadable: a.pickle: pickle does not end with STOP; c lists them") {
		t.Fatalf("all captures broken:\n%s", v)
	}
	caps.mu.Lock()
	for i := range caps.list {
		caps.list[i].Error, caps.list[i].Writing = "still being written", true
	}
	caps.mu.Unlock()
	m.Update(tickMsg(fixedNow.Add(time.Second)))
	if v := m.View(); !strings.Contains(v, "3 captures, still being written") {
		t.Fatalf("all captures being written:\n%s", v)
	}
	caps.mu.Lock()
	caps.list = nil
	caps.mu.Unlock()
	m.Update(tickMsg(fixedNow.Add(2 * time.Second)))
	if v := m.View(); !strings.Contains(v, "waiting for data") {
		t.Fatalf("no captures yet:\n%s", v)
	}
}
