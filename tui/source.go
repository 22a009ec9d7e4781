// Package tui is npumon's terminal UI (Bubble Tea v1): a header, a memory
// timeline, the segment map, the event trace and the op table, all driven by
// one time cursor. It reads data only through Source (a *store.Store
// satisfies it) and never touches files, sockets or sources itself.
package tui

import (
	"fmt"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// Source is the part of store.Store the UI queries. Every method must be
// safe to call while another goroutine appends data.
type Source interface {
	Version() uint64
	Devices() []int
	TimeBase(device int) store.TimeBase
	Bounds(device int) (first, last int64)
	Len(device int) int64
	Stack(id snapshot.StackID) snapshot.Stack
	DeviceInfo(device int) (store.DeviceInfo, bool)

	StateAt(device int, cursor int64) store.State
	Series(device int, t0, t1 int64, columns int) store.Series
	EventsAround(device int, cursor int64, before, after int) []store.Event
	Ops(t0, t1 int64) []store.Op
	OpAt(t int64) (store.Op, bool)
	Summary(device int, cursor int64) store.Summary
	Next(device int, cursor int64, action snapshot.Action) (int64, bool)
	NextEvent(device int, cursor int64) (int64, bool)
	PrevEvent(device int, cursor int64) (int64, bool)
	Peak(device int) (cursor int64, activeBytes int64)
}

// eventOpSource attributes an entry itself rather than its time
// (store.Store.OpOf): an entry whose time was recovered only as an
// interval gets oprange.Interval's op, as explain gives the OOM.
type eventOpSource interface {
	OpOf(e store.Event) (store.Op, bool)
}

// opOf is the op entry e is attributed to: the Source's OpOf where it has
// one, else OpAt its time.
func opOf(src Source, e *store.Event) (store.Op, bool) {
	if es, ok := src.(eventOpSource); ok {
		return es.OpOf(*e)
	}
	return src.OpAt(e.Time)
}

// *store.Store is the Source every command passes.
var _ Source = (*store.Store)(nil)

// seqSource is a Source with sequence-precise positions (the state after
// the first n entries). Real captures hold several entries in one
// microsecond; with it, ←/→ step one entry at a time inside them, and the
// summary, segment map and event highlight follow. Without it stepping
// moves by time.
type seqSource interface {
	StateAtSeq(device int, n int64) store.State
	SummaryAtSeq(device int, n int64) store.Summary
	EventsAroundSeq(device int, n int64, before, after int) []store.Event
}

var _ seqSource = (*store.Store)(nil)

// retainSource is implemented by stores with a retention window.
type retainSource interface {
	Retained(device int) store.RetainInfo
}

var _ retainSource = (*store.Store)(nil)

// gapSource is implemented by stores that record entries a live producer dropped.
type gapSource interface {
	Gaps(device int) []store.GapRecord
}

// hbm is the device's HBM used / total for live sources that know it.
func (m *Model) hbm() (string, bool) {
	info, ok := m.o.Source.DeviceInfo(m.dev)
	if !ok || info.HBMTotal <= 0 {
		return "", false
	}
	return fmt.Sprintf("HBM %s / %s", bytesize.Format(info.HBMUsed), bytesize.Format(info.HBMTotal)), true
}

// dropped is the number of entries the producer dropped on this device,
// and the number of holes of unknown size.
func (m *Model) dropped() (n int64, holes int) {
	g, ok := m.o.Source.(gapSource)
	if !ok {
		return 0, 0
	}
	for _, r := range g.Gaps(m.dev) {
		n += r.Missed
		if r.Missed == 0 {
			holes++
		}
	}
	return n, holes
}
