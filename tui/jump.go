package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/npumon/npumon/monitor/store"
)

// parseJump turns the `t` prompt into a cursor value.
func (m *Model) parseJump(s string) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return m.cur.cursor, nil
	case strings.HasPrefix(s, "+"):
		if m.d.base == store.TimeSequence {
			n, err := strconv.ParseInt(s[1:], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("jump: %q: want +N entries (no timestamps in this file)", s)
			}
			return m.d.first + n, nil
		}
		d, err := time.ParseDuration(s[1:])
		if err != nil {
			return 0, fmt.Errorf("jump: %q: want a duration like +1.5s", s)
		}
		return m.d.first + d.Microseconds(), nil
	case strings.HasPrefix(s, "#"):
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("jump: %q: want #N, an entry number", s)
		}
		if m.d.base == store.TimeSequence {
			return n, nil
		}
		if n >= m.d.n {
			return 0, fmt.Errorf("jump: #%d: the log has %d entries", n, m.d.n)
		}
		// Binary search the smallest time at which entry n is applied;
		// EventsAround(t, 1, 0) is the last entry at or before t, O(log n).
		applied := func(t int64) int64 {
			evs := m.o.Source.EventsAround(m.d.dev, t, 1, 0)
			if len(evs) == 0 {
				return 0
			}
			return evs[0].Seq + 1
		}
		lo, hi := m.d.first-1, m.d.last // applied(lo) ≤ n < applied(hi)
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if applied(mid) > n {
				hi = mid
			} else {
				lo = mid
			}
		}
		return hi, nil
	case strings.Contains(s, ":"):
		if m.d.base == store.TimeSequence {
			return 0, fmt.Errorf("jump: no timestamps in this file; use #N")
		}
		for _, layout := range []string{"2006-01-02 15:04:05.999999", "2006-01-02T15:04:05.999999"} {
			if t, err := time.ParseInLocation(layout, s, m.o.Location); err == nil {
				return t.UnixMicro(), nil
			}
		}
		var t time.Time
		var err error
		for _, layout := range []string{"15:04:05.999999", "15:04"} { // the first also reads 15:04:05
			if t, err = time.ParseInLocation(layout, s, m.o.Location); err == nil {
				break
			}
		}
		if err != nil {
			return 0, fmt.Errorf("jump: %q: want HH:MM:SS[.mmm] or YYYY-MM-DD HH:MM:SS[.mmm]", s)
		}
		day := time.UnixMicro(m.cur.cursor).In(m.o.Location)
		t = time.Date(day.Year(), day.Month(), day.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), m.o.Location)
		return t.UnixMicro(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("jump: %q: not a time (see ? for formats)", s)
	}
	return n, nil
}
