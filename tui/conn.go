package tui

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
)

// ClientConn is a wire client's status as the header shows it
// (Options.ConnState): the state in the words of wire.ConnState, which
// attach's headless JSON also uses, and a detail: the producer once
// connected, the attempt while reconnecting, and while disconnected the
// reason (a producer's goodbye, while retries fail too) and when the next
// attempt is.
func ClientConn(s wire.ClientStatus) (wire.ConnState, string) {
	why := ""
	var bye *wire.GoodbyeError
	switch {
	case errors.As(s.Err, &bye): // why the data stopped, not a retry's dial error
		why = "goodbye: " + bye.Reason
	case s.Err != nil: // the innermost cause: "connection refused", not the dial's whole story
		why = s.Err.Error()
		if i := strings.IndexByte(why, '\n'); i >= 0 {
			why = why[:i]
		}
		if i := strings.LastIndex(why, ": "); i >= 0 {
			why = why[i+2:]
		}
	}
	switch s.State {
	case wire.ConnConnected:
		if h := s.Hello; h != nil {
			d := fmt.Sprintf("pid %d@%s", h.PID, h.Host)
			if h.TimeBase == store.TimePollUS { // times are when the producer saw the entries
				d += " · times ≈" + h.Resolution.String()
			}
			return s.State, d
		}
		return s.State, ""
	case wire.ConnReconnecting:
		return s.State, fmt.Sprintf("attempt %d", s.Attempt)
	case wire.ConnDisconnected:
		if s.Backoff > 0 {
			return s.State, fmt.Sprintf("· reconnecting in %s · %s", s.Backoff.Round(100*time.Millisecond), why)
		}
	}
	return s.State, why
}
