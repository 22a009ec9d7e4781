package tui

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// holdingCaptures is dirCaptures with the hold a watched directory offers.
type holdingCaptures struct {
	dirCaptures
	held     bool
	newCount int
	followed int
}

func (h *holdingCaptures) SetHold(on bool)  { h.mu.Lock(); h.held = on; h.mu.Unlock() }
func (h *holdingCaptures) NewCaptures() int { h.mu.Lock(); defer h.mu.Unlock(); return h.newCount }
func (h *holdingCaptures) FollowNewest() error {
	h.mu.Lock()
	h.followed++
	h.newCount = 0
	newest := h.list[len(h.list)-1].Path
	h.mu.Unlock()
	return h.Open(newest)
}

// TestWorkingHoldsTheCapture: pausing holds the open capture, the header
// says how many captures landed meanwhile, and f opens the newest and
// follows again.
func TestWorkingHoldsTheCapture(t *testing.T) {
	st := store.New(store.Options{})
	caps := &holdingCaptures{dirCaptures: dirCaptures{st: st, snaps: map[string]*snapshot.Snapshot{}}}
	caps.add("/dumps/snapshot_1.pickle", smallSnapshot(true), fixedNow)
	if err := caps.Open("/dumps/snapshot_1.pickle"); err != nil {
		t.Fatal(err)
	}
	o := testOptions(st)
	o.SourceName, o.Live, o.Captures = "/dumps", true, caps
	m := newSized(t, o, 160, 30)
	tick := func() { m.Update(tickMsg(fixedNow)) }
	tick()
	if caps.held {
		t.Fatal("held while following")
	}
	press(m, " ") // pause
	tick()
	if !caps.held {
		t.Fatal("pausing does not hold the open capture")
	}
	caps.add("/dumps/snapshot_2.pickle", smallSnapshot(true), fixedNow)
	caps.add("/dumps/snapshot_3.pickle", smallSnapshot(true), fixedNow)
	caps.mu.Lock()
	caps.newCount = 2
	caps.mu.Unlock()
	tick()
	if v := m.View(); !strings.Contains(v, "2 new captures (f follows)") {
		t.Fatalf("header lacks the count of new captures:\n%s", v)
	}
	cmd := press(m, "f")
	if cmd == nil {
		t.Fatal("f in a watched directory opens nothing")
	}
	m.Update(cmd())
	tick()
	if caps.followed != 1 || caps.held || !m.cur.follow {
		t.Errorf("after f: followed %d, held %v, following %v", caps.followed, caps.held, m.cur.follow)
	}
	if v := m.View(); strings.Contains(v, "new capture") || !strings.Contains(v, "snapshot_3.pickle") {
		t.Errorf("after f the header should name the newest capture and no count:\n%s", v)
	}
	// Mark A set, or holders open, hold it too, while following.
	press(m, "m")
	tick()
	if !caps.held {
		t.Error("mark A does not hold the open capture")
	}
	press(m, "m") // clears the mark
	tick()
	if caps.held {
		t.Error("held after the mark was cleared")
	}
	press(m, "h")
	tick()
	if !caps.held {
		t.Error("the holders view does not hold the open capture")
	}
}
