package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
)

// ClientConn maps a wire client's status to the header's connection state
// and detail (Options.ConnState): while no producer is there the header
// says "disconnected" with the reason and when the next attempt is;
// "reconnecting" while an attempt is under way.
func ClientConn(s wire.ClientStatus) (ConnState, string) {
	why := "closed"
	if s.Err != nil { // the innermost cause: "connection refused", not the dial's whole story
		why = s.Err.Error()
		if i := strings.IndexByte(why, '\n'); i >= 0 {
			why = why[:i]
		}
		if i := strings.LastIndex(why, ": "); i >= 0 {
			why = why[i+2:]
		}
	}
	switch s.State {
	case wire.StateConnected:
		if h := s.Hello; h != nil {
			d := fmt.Sprintf("pid %d@%s", h.PID, h.Host)
			if h.TimeBase == store.TimePollUS { // times are when the producer saw the entries
				d += " · times ≈" + h.Resolution.String()
			}
			return ConnConnected, d
		}
		return ConnConnected, ""
	case wire.StateConnecting:
		if s.Attempt == 0 {
			return ConnReconnecting, "connecting…"
		}
		return ConnReconnecting, fmt.Sprintf("attempt %d", s.Attempt)
	case wire.StateReconnecting:
		return ConnDisconnected, fmt.Sprintf("· reconnecting in %s · %s", s.Backoff.Round(100*time.Millisecond), why)
	}
	return ConnDisconnected, why
}
