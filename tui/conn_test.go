package tui

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor"
)

// TestClientConn: each client state reads as the header shows it, with the
// innermost cause of a failure (first line only) as the reason.
func TestClientConn(t *testing.T) {
	refused := fmt.Errorf("dial unix /tmp/x.sock: %w", errors.New("connect: connection refused\nmore detail"))
	for _, c := range []struct {
		s      monitor.ClientStatus
		state  ConnState
		detail string
	}{
		{monitor.ClientStatus{State: monitor.StateConnected, Hello: &monitor.Hello{PID: 42, Host: "node1"}}, ConnConnected, "pid 42@node1"},
		{monitor.ClientStatus{State: monitor.StateConnected}, ConnConnected, ""},
		{monitor.ClientStatus{State: monitor.StateConnecting}, ConnReconnecting, "connecting…"},
		{monitor.ClientStatus{State: monitor.StateConnecting, Attempt: 3}, ConnReconnecting, "attempt 3"},
		{monitor.ClientStatus{State: monitor.StateReconnecting, Err: refused, Backoff: 1234 * time.Millisecond}, ConnDisconnected, "· reconnecting in 1.2s · connection refused"},
		{monitor.ClientStatus{State: monitor.StateClosed}, ConnDisconnected, "closed"},
	} {
		state, detail := ClientConn(c.s)
		if state != c.state || detail != c.detail {
			t.Errorf("%+v: %v %q; want %v %q", c.s, state, detail, c.state, c.detail)
		}
	}
}
