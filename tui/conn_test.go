package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor"
)

// TestClientConn: each client state reads as the header shows it, with the
// innermost cause of a failure (first line only) as the reason.
func TestClientConn(t *testing.T) {
	refused := fmt.Errorf("dial unix /tmp/x.sock: %w", errors.New("connect: connection refused\nmore detail"))
	for i, c := range []struct {
		s      monitor.ClientStatus
		state  ConnState
		detail string
	}{
		{monitor.ClientStatus{State: monitor.StateConnected, Hello: &monitor.Hello{PID: 42, Host: "node1"}}, ConnConnected, "pid 42@node1"},
		{monitor.ClientStatus{State: monitor.StateConnected}, ConnConnected, ""},
		// a producer that stamps entries with its poll time says how coarse they are
		{monitor.ClientStatus{State: monitor.StateConnected, Hello: &monitor.Hello{PID: 42, Host: "node1",
			TimeBase: monitor.TimePollUS, Resolution: 500 * time.Millisecond}}, ConnConnected, "pid 42@node1 · times ≈500ms"},
		{monitor.ClientStatus{State: monitor.StateConnecting}, ConnReconnecting, "connecting…"},
		{monitor.ClientStatus{State: monitor.StateConnecting, Attempt: 3}, ConnReconnecting, "attempt 3"},
		{monitor.ClientStatus{State: monitor.StateReconnecting, Err: refused, Backoff: 1234 * time.Millisecond}, ConnDisconnected, "· reconnecting in 1.2s · connection refused"},
		{monitor.ClientStatus{State: monitor.StateClosed}, ConnDisconnected, "closed"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			state, detail := ClientConn(c.s)
			if state != c.state || detail != c.detail {
				t.Errorf("%+v: %v %q; want %v %q", c.s, state, detail, c.state, c.detail)
			}
		})
	}
}

// TestHeaderDroppedOfUnknownSize: a gap of unknown size (a producer whose
// ring buffer wrapped between two polls) still warns in the header.
func TestHeaderDroppedOfUnknownSize(t *testing.T) {
	for i, c := range []struct {
		gaps []int64
		want string
	}{
		{[]int64{0}, "entries dropped"},
		{[]int64{7, 0}, "7+ entries dropped"},
		{[]int64{7}, "7 entries dropped"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			st := monitor.NewStore(monitor.StoreOptions{})
			if err := st.StartLive(smallSnapshot(true), nil); err != nil {
				t.Fatal(err)
			}
			for _, g := range c.gaps {
				st.NoteGap(0, g)
			}
			o := testOptions(st)
			o.Live = true
			m := newSized(t, o, 120, 40)
			if v := m.View(); !strings.Contains(v, c.want) || (c.want == "entries dropped" && strings.Contains(v, "+ entries")) {
				t.Errorf("gaps %v: header lacks %q:\n%s", c.gaps, c.want, v)
			}
		})
	}
}
