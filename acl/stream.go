package acl

import "time"

// Stream is an aclrtStream handle. Created handles are non-zero, increase
// and look like host pointers; DefaultStream (0) is the device's default
// stream, which always exists and cannot be destroyed.
type Stream uint64

// DefaultStream is the null stream of ACL calls that take no stream.
const DefaultStream Stream = 0

// Event is an aclrtEvent handle (non-zero, increasing).
type Event uint64

// EventStatus is aclrtEventStatus.
type EventStatus int

// aclrtEventStatus values.
const (
	EventComplete EventStatus = 0
	EventNotReady EventStatus = 1
)

func (s EventStatus) String() string {
	if s == EventComplete {
		return "complete"
	}
	return "not ready"
}

// stream keeps the completion time of the last work enqueued on it: work
// runs in order, so that is all the state ordering needs.
type stream struct {
	tail time.Time
}

// event remembers the instant the work before its last record completes.
type event struct {
	recorded bool
	at       time.Time
}

// getStream resolves s; d.mu held. The default stream is created lazily.
func (d *Device) getStream(api string, s Stream) (*stream, error) {
	if st, ok := d.streams[s]; ok {
		return st, nil
	}
	if s != DefaultStream {
		return nil, newErr(CodeRTInvalidHandle, api, "unknown stream %#x", uint64(s))
	}
	st := &stream{}
	d.streams[DefaultStream] = st
	return st, nil
}

func (d *Device) getEvent(api string, e Event) (*event, error) {
	ev, ok := d.events[e]
	if !ok {
		return nil, newErr(CodeRTInvalidHandle, api, "unknown event %#x", uint64(e))
	}
	return ev, nil
}

// CreateStream creates a stream (aclrtCreateStream).
func (d *Device) CreateStream() (Stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextStream += 0x40
	s := Stream(d.nextStream)
	d.streams[s] = &stream{}
	return s, nil
}

// DestroyStream destroys s (aclrtDestroyStream). Work already enqueued still
// completes for events recorded on it.
func (d *Device) DestroyStream(s Stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s == DefaultStream {
		return newErr(CodeRTParamInvalid, "aclrtDestroyStream", "the default stream cannot be destroyed")
	}
	if _, err := d.getStream("aclrtDestroyStream", s); err != nil {
		return err
	}
	delete(d.streams, s)
	return nil
}

// Launch enqueues work lasting dur on s. It starts when the device clock
// reaches the end of the previous work on s (and of any events s waits on)
// and completes dur later.
func (d *Device) Launch(s Stream, dur time.Duration) error {
	if dur < 0 {
		return newErr(CodeRTParamInvalid, "Launch", "negative duration %v", dur)
	}
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.getStream("Launch", s)
	if err != nil {
		return err
	}
	st.tail = later(st.tail, now).Add(dur)
	d.busyUntil = later(d.busyUntil, st.tail)
	return nil
}

// StreamIdleAt returns when all work enqueued so far on s completes.
func (d *Device) StreamIdleAt(s Stream) (time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.getStream("StreamIdleAt", s)
	if err != nil {
		return time.Time{}, err
	}
	return st.tail, nil
}

// SynchronizeStream waits until all work enqueued on s has completed
// (aclrtSynchronizeStream); on a ManualClock it moves the clock there.
func (d *Device) SynchronizeStream(s Stream) error {
	d.mu.Lock()
	st, err := d.getStream("aclrtSynchronizeStream", s)
	var t time.Time
	if err == nil {
		t = st.tail
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	d.clock.SleepUntil(t)
	return nil
}

// CreateEvent creates an event (aclrtCreateEvent). An event never recorded
// queries as complete.
func (d *Device) CreateEvent() (Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextEvent += 0x40
	e := Event(d.nextEvent)
	d.events[e] = &event{}
	return e, nil
}

// DestroyEvent destroys e (aclrtDestroyEvent).
func (d *Device) DestroyEvent(e Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.getEvent("aclrtDestroyEvent", e); err != nil {
		return err
	}
	delete(d.events, e)
	return nil
}

// RecordEvent records e on s (aclrtRecordEvent): e completes when all work
// enqueued on s before this call has completed. Recording again replaces the
// previous record.
func (d *Device) RecordEvent(e Event, s Stream) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	ev, err := d.getEvent("aclrtRecordEvent", e)
	if err != nil {
		return err
	}
	st, err := d.getStream("aclrtRecordEvent", s)
	if err != nil {
		return err
	}
	ev.recorded = true
	ev.at = later(st.tail, now)
	return nil
}

// QueryEvent reports whether e has completed (aclrtQueryEvent).
func (d *Device) QueryEvent(e Event) (EventStatus, error) {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	ev, err := d.getEvent("aclrtQueryEvent", e)
	if err != nil {
		return EventNotReady, err
	}
	if ev.recorded && now.Before(ev.at) {
		return EventNotReady, nil
	}
	return EventComplete, nil
}

// SynchronizeEvent waits until e has completed (aclrtSynchronizeEvent).
func (d *Device) SynchronizeEvent(e Event) error {
	d.mu.Lock()
	ev, err := d.getEvent("aclrtSynchronizeEvent", e)
	var t time.Time
	if err == nil {
		t = ev.at
	}
	d.mu.Unlock()
	if err != nil {
		return err
	}
	d.clock.SleepUntil(t)
	return nil
}

// StreamWaitEvent makes work enqueued on s after this call start only once
// e has completed (aclrtStreamWaitEvent). It waits on e's current record; a
// later re-record does not affect it. Waiting on a never-recorded event is a
// no-op.
func (d *Device) StreamWaitEvent(s Stream, e Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	st, err := d.getStream("aclrtStreamWaitEvent", s)
	if err != nil {
		return err
	}
	ev, err := d.getEvent("aclrtStreamWaitEvent", e)
	if err != nil {
		return err
	}
	if ev.recorded {
		st.tail = later(st.tail, ev.at)
		d.busyUntil = later(d.busyUntil, st.tail)
	}
	return nil
}

// SynchronizeDevice waits until all work on all streams of the device has
// completed (aclrtSynchronizeDevice).
func (d *Device) SynchronizeDevice() error {
	d.mu.Lock()
	t := d.busyUntil // includes work of streams destroyed since
	d.mu.Unlock()
	d.clock.SleepUntil(t)
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
