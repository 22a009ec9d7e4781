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
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
)

// Source is the query half of store.Store: everything the UI asks of its
// data, in one interface that a *store.Store implements completely (a test
// may pass a Store it feeds itself, or wrap one). Every method must be safe
// to call while another goroutine appends data. Cursors are times (epoch µs,
// or entry numbers in a TimeSequence log); positions n are entries applied
// (the state after the first n entries).
type Source interface {
	// The shape of the data.
	Version() uint64
	Devices() []int
	TimeBase(device int) store.TimeBase
	Bounds(device int) (first, last int64)
	Len(device int) int64
	Stack(id snapshot.StackID) snapshot.Stack
	DeviceInfo(device int) (store.DeviceInfo, bool)
	// Streams is the order in which device's trace first used its streams
	// (the events pane labels them s0, s1, … by it).
	Streams(device int) []uint64
	// Retained is device's retention window (--retain): before it the
	// detail is thinned.
	Retained(device int) store.RetainInfo
	// Gaps are the entries a live producer dropped.
	Gaps(device int) []store.GapRecord

	// By time cursor.
	StateAt(device int, cursor int64) store.State
	Series(device int, t0, t1 int64, columns int) store.Series
	EventsAround(device int, cursor int64, before, after int) []store.Event
	Summary(device int, cursor int64) store.Summary
	Next(device int, cursor int64, action snapshot.Action) (int64, bool)
	Prev(device int, cursor int64, action snapshot.Action) (int64, bool)
	NextEvent(device int, cursor int64) (int64, bool)
	PrevEvent(device int, cursor int64) (int64, bool)
	Peak(device int) (cursor int64, activeBytes int64)

	// By position: real captures hold several entries in one
	// microsecond, and ←/→ step one entry at a time inside them; the
	// summary, segment map and event highlight follow.
	StateAtSeq(device int, n int64) store.State
	SummaryAtSeq(device int, n int64) store.Summary
	EventsAroundSeq(device int, n int64, before, after int) []store.Event
	// LiveAtSeq lists the live allocations after n entries (the holders
	// view, mark A, the OOM panel's top holders).
	LiveAtSeq(device int, n int64) []replay.Alloc

	// Memory categories: Categories says what each allocation holds (the
	// Born of LiveAtSeq's allocations indexes it); CategorySeries is the
	// stacked category chart's columns.
	Categories(device int) *category.Table
	CategorySeries(device int, t0, t1 int64, columns int) [][category.Count]int64

	// Ops. OpsSince is what changed in the op list since a version (0:
	// all of it): the op table follows a live source by copying only new
	// ops.
	OpsSince(ver uint64) (ops []store.Op, from int, now uint64)
	OpAt(t int64) (store.Op, bool)
	// OpName is OpAt's name ("" when none), for a grouper.
	OpName(t int64) string
	// OpOf attributes an entry itself rather than its time: an entry
	// whose time was recovered only as an interval gets
	// oprange.Interval's op, as explain gives the OOM.
	OpOf(e store.Event) (store.Op, bool)
}

// *store.Store is the Source every command passes.
var _ Source = (*store.Store)(nil)

// hbm is the device's HBM used / total for live sources that know it.
func (m *Model) hbm() (string, bool) {
	info, ok := m.o.Source.DeviceInfo(m.d.dev)
	if !ok || info.HBMTotal <= 0 {
		return "", false
	}
	return fmt.Sprintf("HBM %s / %s", bytesize.Format(info.HBMUsed), bytesize.Format(info.HBMTotal)), true
}

// dropped is the number of entries the producer dropped on this device,
// and the number of holes of unknown size.
func (m *Model) dropped() (n int64, holes int) {
	for _, r := range m.o.Source.Gaps(m.d.dev) {
		n += r.Missed
		if r.Missed == 0 {
			holes++
		}
	}
	return n, holes
}
