package tui

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
)

// TestLiveStoreFedWhileRunning runs the app on a live store.Store that a
// producer goroutine appends to, as `npumon attach` does: the screen follows
// the newest entry, shows HBM and the connection state, and a pause holds
// the cursor while data keeps arriving.
func TestLiveStoreFedWhileRunning(t *testing.T) {
	st := store.New(store.Options{})
	if err := st.StartLive(nil, []store.DeviceInfo{{ID: 0, Name: "Ascend910B3", HBMTotal: 64 << 30, HBMUsed: 3 << 30}}); err != nil {
		t.Fatal(err)
	}
	o := testOptions(st)
	o.Live = true
	o.SourceName = "pid 4242 @ /run/npumon.sock"
	o.Tick = 20 * time.Millisecond
	var connDown atomic.Bool // the connection's owner flips it; the app polls
	o.ConnState = func() (wire.ConnState, string) {
		if connDown.Load() {
			return wire.ConnDisconnected, "connection refused"
		}
		return wire.ConnConnected, ""
	}
	tm := teatest.NewTestModel(t, New(o), teatest.WithInitialTermSize(160, 48))

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the producer: batches of alloc/free pairs
		defer close(done)
		tt := t0
		st.Append(0, []snapshot.TraceEntry{{Action: snapshot.ActionSegmentAlloc, Addr: segA, Size: 20 * mib, TimeUS: tt}})
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tt += 1000
			st.Append(0, []snapshot.TraceEntry{
				{Action: snapshot.ActionAlloc, Addr: segA, Size: mib, TimeUS: tt},
				{Action: snapshot.ActionFreeCompleted, Addr: segA, Size: mib, TimeUS: tt + 500},
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()

	wait := func(what string, cond func(string) bool) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return cond(string(b)) },
			teatest.WithDuration(time.Minute), teatest.WithCheckInterval(20*time.Millisecond))
	}
	wait("live header", func(s string) bool {
		return strings.Contains(s, "LIVE") && strings.Contains(s, "HBM 3.00 GiB / 64.0 GiB") && strings.Contains(s, "pid 4242")
	})
	connDown.Store(true)
	wait("conn state", func(s string) bool { return strings.Contains(s, "disconnected connection refused") })
	tm.Send(keyMsg("space"))
	wait("paused", func(s string) bool { return strings.Contains(s, "behind (") })
	tm.Send(keyMsg("f"))
	wait("following again", func(s string) bool { return bytes.Contains([]byte(s), []byte("LIVE")) })
	tm.Send(keyMsg("q"))
	fm := tm.FinalModel(t, teatest.WithFinalTimeout(time.Minute)).(*Model)
	if fm.Summary().Applied < 3 || !fm.cur.follow {
		t.Fatalf("final: applied %d follow %v", fm.Summary().Applied, fm.cur.follow)
	}
}

// TestDeviceSwitch cycles devices with d on a two-device capture.
func TestDeviceSwitch(t *testing.T) {
	snap := smallSnapshot(true)
	second := make([]snapshot.TraceEntry, 0, 3)
	for i, e := range []snapshot.TraceEntry{
		{Action: snapshot.ActionSegmentAlloc, Addr: 0x7e0000000000, Size: 4 * mib},
		{Action: snapshot.ActionAlloc, Addr: 0x7e0000000000, Size: mib},
		{Action: snapshot.ActionFreeCompleted, Addr: 0x7e0000000000, Size: mib},
	} {
		e.TimeUS = t0 + 500 + int64(i)*tStep
		second = append(second, e)
	}
	snap.DeviceTraces = append(snap.DeviceTraces, second)
	snap.Segments = append(snap.Segments, snapshot.Segment{Device: 1, Address: 0x7e0000000000, TotalSize: 4 * mib,
		Blocks: []snapshot.Block{{Address: 0x7e0000000000, Size: 4 * mib, State: snapshot.StateInactive}}})
	m := newSized(t, testOptions(storeOf(t, snap, nil)), 160, 48)
	if !strings.Contains(m.View(), "dev 0 (1 of 2)") {
		t.Fatalf("header:\n%s", m.View())
	}
	press(m, "d")
	v := m.View()
	if m.Device() != 1 || !strings.Contains(v, "dev 1 (2 of 2)") || !strings.Contains(v, "0x7e0000000000") || !strings.Contains(v, "entry #2/3") {
		t.Fatalf("after d:\n%s", v)
	}
	// Each device keeps its own cursor: move device 1 to its start, back
	// to device 0 (still at its end), then device 1 is at its start again.
	press(m, "g")
	press(m, "d")
	if m.Device() != 0 || !strings.Contains(m.View(), "entry #8/9") {
		t.Fatalf("d should wrap to device 0 at its own cursor:\n%s", m.View())
	}
	press(m, "d")
	if v := m.View(); m.Device() != 1 || !strings.Contains(v, "entry #–/3") {
		t.Fatalf("device 1 lost its cursor:\n%s", v)
	}
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	if v := m.View(); !strings.Contains(v, "dev 1 (2 of 2)") {
		t.Fatalf("80×24 header:\n%s", v)
	}
	press(m, "d")
}

// TestLiveOpsIncremental: live ops are re-read from the tail only, and the
// table ends up with every op exactly once, in start order.
func TestLiveOpsIncremental(t *testing.T) {
	st := store.New(store.Options{})
	if err := st.StartLive(nil, []store.DeviceInfo{{ID: 0}}); err != nil {
		t.Fatal(err)
	}
	st.Append(0, []snapshot.TraceEntry{{Action: snapshot.ActionSegmentAlloc, Addr: segA, Size: mib, TimeUS: t0}})
	o := testOptions(st)
	o.Live = true
	m := newSized(t, o, 120, 40)
	var want int
	for batch := 0; batch < 50; batch++ {
		var ops []store.Op
		for i := 0; i < 20; i++ {
			s := t0 + int64(batch)*1_000_000 + int64(i)*50_000
			ops = append(ops, store.Op{Name: "aten::add", StartUS: s, EndUS: s + 10_000, Seq: int64(want)})
			want++
		}
		if batch == 30 { // one op arrives 3 s late
			ops = append(ops, store.Op{Name: "late", StartUS: t0 + 27_000_000, EndUS: t0 + 27_000_001, Seq: -1})
			want++
		}
		st.AppendOps(ops)
		m.Update(tickMsg(fixedNow))
	}
	if len(m.p.ops.ops) != want {
		t.Fatalf("%d ops in the table, want %d", len(m.p.ops.ops), want)
	}
	seen := map[int64]bool{}
	for i, op := range m.p.ops.ops {
		if i > 0 && op.StartUS < m.p.ops.ops[i-1].StartUS {
			t.Fatalf("ops out of order at %d", i)
		}
		if op.Seq >= 0 && seen[op.Seq] {
			t.Fatalf("op %d twice", op.Seq)
		}
		seen[op.Seq] = true
	}
}
