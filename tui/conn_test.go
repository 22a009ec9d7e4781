package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/tui/theme"
)

// TestClientConn: each client state reads as the header shows it, in the
// words of the client's own state (which attach's JSON prints), with the
// innermost cause of a failure (first line only) as the reason.
func TestClientConn(t *testing.T) {
	refused := fmt.Errorf("dial unix /tmp/x.sock: %w", errors.New("connect: connection refused\nmore detail"))
	for i, c := range []struct {
		s      wire.ClientStatus
		state  wire.ConnState
		detail string
	}{
		{wire.ClientStatus{State: wire.ConnConnected, Hello: &wire.Hello{PID: 42, Host: "node1"}}, wire.ConnConnected, "pid 42@node1"},
		{wire.ClientStatus{State: wire.ConnConnected}, wire.ConnConnected, ""},
		// a producer that stamps entries with its poll time says how coarse they are
		{wire.ClientStatus{State: wire.ConnConnected, Hello: &wire.Hello{PID: 42, Host: "node1",
			TimeBase: store.TimePollUS, Resolution: 500 * time.Millisecond}}, wire.ConnConnected, "pid 42@node1 · times ≈500ms"},
		{wire.ClientStatus{State: wire.ConnConnecting}, wire.ConnConnecting, ""},
		{wire.ClientStatus{State: wire.ConnReconnecting, Attempt: 3}, wire.ConnReconnecting, "attempt 3"},
		{wire.ClientStatus{State: wire.ConnDisconnected, Err: refused, Backoff: 1234 * time.Millisecond}, wire.ConnDisconnected, "· reconnecting in 1.2s · connection refused"},
		{wire.ClientStatus{State: wire.ConnDisconnected, Err: refused}, wire.ConnDisconnected, "connection refused"},
		{wire.ClientStatus{State: wire.ConnClosed}, wire.ConnClosed, ""},
		// after a goodbye the retries' dial errors do not hide it
		{wire.ClientStatus{State: wire.ConnDisconnected, Err: fmt.Errorf("%w; reconnecting: %w", &wire.GoodbyeError{Reason: "finished"}, refused),
			Backoff: 2 * time.Second}, wire.ConnDisconnected, "· reconnecting in 2s · goodbye: finished"},
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
			st := store.New(store.Options{})
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

// TestHeaderKeepsConnectionReason: where the wide first line would cut a
// disconnected client's retry time and reason off, the compact line shows
// them; where it fits, the wide line stays; where even the compact line
// cannot hold them (80 and 100 columns), the header keeps the state word
// and the hint line at the bottom shows the reason whole.
func TestHeaderKeepsConnectionReason(t *testing.T) {
	detail := "· reconnecting in 1.6s · goodbye: producer closing"
	for _, c := range []struct {
		w           int
		wide, below bool
	}{{80, false, true}, {100, false, true}, {120, false, false}, {140, false, false}, {200, true, false}} {
		t.Run(fmt.Sprint(c.w), func(t *testing.T) {
			st := store.New(store.Options{})
			if err := st.StartLive(smallSnapshot(true), nil); err != nil {
				t.Fatal(err)
			}
			o := testOptions(st)
			o.Live = true
			o.ConnState = func() (wire.ConnState, string) { return wire.ConnDisconnected, detail }
			m := newSized(t, o, c.w, 24)
			m.Update(tickMsg(fixedNow))
			lines := strings.Split(m.View(), "\n")
			top, bottom := lines[0], lines[len(lines)-1]
			whole := "disconnected " + detail
			if c.below {
				if strings.Contains(top, detail[:6]) || !strings.Contains(top, "disconnected") || !strings.Contains(bottom, whole) {
					t.Errorf("%d columns: want the state on top and the reason below:\n%s\n…\n%s", c.w, top, bottom)
				}
				for _, l := range []string{top, bottom} {
					if theme.Width(l) > c.w {
						t.Errorf("%d columns: a line of %d:\n%s", c.w, theme.Width(l), l)
					}
				}
				return
			}
			if !strings.Contains(top, whole) || strings.Contains(bottom, whole) {
				t.Errorf("%d columns: the header lacks the reason (or the hint line repeats it):\n%s\n…\n%s", c.w, top, bottom)
			}
			if got := strings.HasPrefix(strings.TrimSpace(top), "npumon"); got != c.wide {
				t.Errorf("%d columns: wide line %v, want %v:\n%s", c.w, got, c.wide, top)
			}
		})
	}
}
