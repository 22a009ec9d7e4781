package replay

import (
	"fmt"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/tiling"
)

// NewTimelineFunc is NewTimeline for a device whose trace s does not hold
// (a TraceSink took it: npumon replay's Store keeps it as records): n
// entries, entry(i, e) writing entry i into e. It reads them forward once
// (the start rules) and backward once (Initial's undo walk). Entries is
// nil; Initial, Start, ActiveAtStart and ReservedAtStart are NewTimeline's.
func NewTimelineFunc(s *snapshot.Snapshot, device int, n int, entry func(i int, e *snapshot.TraceEntry)) (*Timeline, error) {
	if s == nil {
		return nil, fmt.Errorf("timeline: no snapshot")
	}
	final := deviceSegments(s, device)
	if n == 0 && len(final) == 0 {
		return nil, fmt.Errorf("timeline: device %d has no segments and no trace in this snapshot", device)
	}
	acc := newTraceAcc()
	var e snapshot.TraceEntry
	for i := range n {
		entry(i, &e)
		acc.add(&e)
	}
	t := timelineOf(device, nil, final, acc, SizeRounder(s))
	if device >= 0 && device < len(s.Forward) {
		t.Forward = s.Forward[device]
	}
	st := tiling.FromSegments(t.final)
	for j := n - 1; j >= 0; j-- {
		entry(j, &e)
		st.Undo(&e, t.Device, t.round)
	}
	t.Initial, _ = t.materialize(st)
	return t, nil
}
