package store

import "github.com/npumon/npumon/allocator/snapshot"

// Marker entries. A live Store notes where a producer's state was replaced
// by a fresh snapshot with an entry of its own, so that nothing received
// before is rewritten: the entries before the marker keep their byte
// figures and segment maps, the marker's figures are the snapshot's totals,
// and the segment map from the marker on is the snapshot's.
const (
	// ActionRestart marks a new producer process (another pid) taking
	// over the session; the entry's Addr holds its pid.
	ActionRestart = snapshot.ActionRestart
	// ActionResync marks a fresh snapshot from the same producer (after
	// entries were dropped, or a reconnect).
	ActionResync = snapshot.ActionResync
)

// IsMarker reports whether a is one of the Store's marker actions.
func IsMarker(a snapshot.Action) bool { return a == ActionRestart || a == ActionResync }

// appendMarker appends a marker entry at time now (kept non-decreasing)
// after which the state is segs.
func (d *devLog) appendMarker(segs []snapshot.Segment, action snapshot.Action, pid int, now int64) {
	seq := int64(d.recs.Len())
	t := now
	switch {
	case d.base == TimeSequence:
		t = seq
	case seq > 0 && t <= d.recs.last().time:
		// after the last entry, so a time cursor there still shows the
		// state before the marker
		t = d.recs.last().time + 1
	}
	// attr 0 (the zero attr) without marking it used: a marker adds no stream
	d.recs.append(rec{time: t, addr: uint64(pid), action: action})
	d.head = stateFromSegments(segs)
	var act, pend, res int64
	for b := range d.head.Blocks() {
		act += b.Live()
		if b.State == snapshot.StateActivePendingFree {
			pend += b.Live()
		}
	}
	for sg := range d.head.Segments() {
		res += sg.TotalSize
	}
	d.pending = pend
	d.active.append(act)
	d.allocated.append(act - pend)
	d.reserved.append(res)
	d.byAction[action].append(seq)
	cp := d.head.Freeze(seq + 1)
	if last := len(d.cps) - 1; last >= 0 && d.cps[last].At == seq+1 {
		d.cps[last] = cp
	} else {
		d.cps = append(d.cps, cp)
	}
	d.lastMu.Lock()
	d.last, d.measured = nil, measured{}
	d.lastMu.Unlock()
}
