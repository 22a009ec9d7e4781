package acl

import (
	"testing"
	"time"
)

func mustStream(t *testing.T, d *Device) Stream {
	t.Helper()
	s, err := d.CreateStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustEvent(t *testing.T, d *Device) Event {
	t.Helper()
	e, err := d.CreateEvent()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func status(t *testing.T, d *Device, e Event) EventStatus {
	t.Helper()
	st, err := d.QueryEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestHandles(t *testing.T) {
	r := NewRuntime(Config{Devices: []DeviceSpec{{}, {}}, Clock: NewManualClock(t0)})
	d0, _ := r.Device(0)
	d1, _ := r.Device(1)
	s1, s2 := mustStream(t, d0), mustStream(t, d0)
	e1, e2 := mustEvent(t, d0), mustEvent(t, d0)
	o, _ := d1.CreateStream()
	if s1 == 0 || s2 <= s1 || e1 == 0 || e2 <= e1 || o == s1 || o == s2 {
		t.Fatalf("handles %#x %#x %#x %#x other device %#x", s1, s2, e1, e2, o)
	}
	if uint64(s1) == uint64(e1) {
		t.Fatal("stream and event handles collide")
	}
	if n := d0.Info().Streams; n != 2 {
		t.Fatalf("Streams = %d, want 2", n)
	}
	must(t, d0.Launch(DefaultStream, time.Millisecond)) // the default stream is not counted
	if n := d0.Info().Streams; n != 2 {
		t.Fatalf("Streams with default in use = %d, want 2", n)
	}
	must(t, d0.DestroyStream(s1))
	if n := d0.Info().Streams; n != 1 {
		t.Fatalf("Streams after destroy = %d", n)
	}
	if s3 := mustStream(t, d0); s3 <= s2 {
		t.Fatalf("handle reused or decreasing: %#x after %#x", s3, s2)
	}
}

func TestStreamWorkInOrder(t *testing.T) {
	d, clk := newTestDevice(t)
	s := mustStream(t, d)
	e := mustEvent(t, d)
	if status(t, d, e) != EventComplete {
		t.Fatal("a never-recorded event must query complete")
	}
	must(t, d.Launch(s, 10*time.Millisecond))
	must(t, d.Launch(s, 5*time.Millisecond)) // queued behind the first
	must(t, d.RecordEvent(e, s))
	if idle, _ := d.StreamIdleAt(s); !idle.Equal(t0.Add(15 * time.Millisecond)) {
		t.Fatalf("idle at %v", idle.Sub(t0))
	}
	if status(t, d, e) != EventNotReady {
		t.Fatal("event complete before its work")
	}
	clk.Advance(15*time.Millisecond - time.Nanosecond)
	if status(t, d, e) != EventNotReady {
		t.Fatal("event complete 1ns early")
	}
	clk.Advance(time.Nanosecond)
	if status(t, d, e) != EventComplete {
		t.Fatal("event not complete when its work is done")
	}
	// Work enqueued after the record does not delay the event.
	e2 := mustEvent(t, d)
	must(t, d.RecordEvent(e2, s)) // idle stream: completes at once
	must(t, d.Launch(s, time.Second))
	if status(t, d, e2) != EventComplete {
		t.Fatal("record on an idle stream is not complete at once")
	}
	// Work on an idle stream starts now, not when the stream last finished.
	clk.Advance(10 * time.Second)
	must(t, d.Launch(s, time.Millisecond))
	must(t, d.SynchronizeStream(s))
	if got := clk.Now().Sub(t0); got != 15*time.Millisecond+10*time.Second+time.Millisecond {
		t.Fatalf("clock after sync %v", got)
	}
}

func TestSynchronizeJumpsManualClock(t *testing.T) {
	d, clk := newTestDevice(t)
	s := mustStream(t, d)
	e := mustEvent(t, d)
	must(t, d.Launch(s, 3*time.Millisecond))
	must(t, d.RecordEvent(e, s))
	must(t, d.Launch(s, 4*time.Millisecond))
	must(t, d.SynchronizeEvent(e))
	if got := clk.Now().Sub(t0); got != 3*time.Millisecond {
		t.Fatalf("SynchronizeEvent: clock at %v", got)
	}
	must(t, d.SynchronizeStream(s))
	if got := clk.Now().Sub(t0); got != 7*time.Millisecond {
		t.Fatalf("SynchronizeStream: clock at %v", got)
	}
	must(t, d.SynchronizeStream(s)) // nothing pending: no move
	unrecorded := mustEvent(t, d)
	must(t, d.SynchronizeEvent(unrecorded))
	if got := clk.Now().Sub(t0); got != 7*time.Millisecond {
		t.Fatalf("idle syncs moved the clock to %v", got)
	}
}

func TestStreamWaitEvent(t *testing.T) {
	d, clk := newTestDevice(t)
	s1, s2 := mustStream(t, d), mustStream(t, d)
	e, done := mustEvent(t, d), mustEvent(t, d)
	must(t, d.Launch(s1, 10*time.Millisecond))
	must(t, d.RecordEvent(e, s1))
	// Independent streams run concurrently.
	must(t, d.Launch(s2, time.Millisecond))
	if idle, _ := d.StreamIdleAt(s2); !idle.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("s2 waited for s1 without StreamWaitEvent: %v", idle.Sub(t0))
	}
	must(t, d.StreamWaitEvent(s2, e))
	must(t, d.Launch(s2, 2*time.Millisecond))
	must(t, d.RecordEvent(done, s2))
	// A later re-record of e does not change what s2 already waits for.
	must(t, d.Launch(s1, time.Hour))
	must(t, d.RecordEvent(e, s1))
	must(t, d.SynchronizeEvent(done))
	if got := clk.Now().Sub(t0); got != 12*time.Millisecond {
		t.Fatalf("work after StreamWaitEvent finished at %v, want 12ms", got)
	}
	if status(t, d, e) != EventNotReady {
		t.Fatal("re-recorded event already complete")
	}
	// Waiting on a never-recorded event is a no-op.
	s3 := mustStream(t, d)
	must(t, d.StreamWaitEvent(s3, mustEvent(t, d)))
	must(t, d.Launch(s3, time.Millisecond))
	if idle, _ := d.StreamIdleAt(s3); !idle.Equal(clk.Now().Add(time.Millisecond)) {
		t.Fatalf("wait on unrecorded event delayed s3 to %v", idle.Sub(t0))
	}
}

func TestSynchronizeDevice(t *testing.T) {
	d, clk := newTestDevice(t)
	s1, s2 := mustStream(t, d), mustStream(t, d)
	must(t, d.Launch(s1, 5*time.Millisecond))
	must(t, d.Launch(s2, 9*time.Millisecond))
	must(t, d.Launch(DefaultStream, 2*time.Millisecond))
	must(t, d.DestroyStream(s2)) // its work still runs to completion
	must(t, d.SynchronizeDevice())
	if got := clk.Now().Sub(t0); got != 9*time.Millisecond {
		t.Fatalf("SynchronizeDevice: clock at %v, want 9ms", got)
	}
	must(t, d.SynchronizeDevice())
	if got := clk.Now().Sub(t0); got != 9*time.Millisecond {
		t.Fatalf("idle SynchronizeDevice moved the clock to %v", got)
	}
}

func TestDefaultStream(t *testing.T) {
	d, clk := newTestDevice(t)
	e := mustEvent(t, d)
	must(t, d.Launch(DefaultStream, time.Millisecond))
	must(t, d.RecordEvent(e, DefaultStream))
	must(t, d.SynchronizeStream(DefaultStream))
	if status(t, d, e) != EventComplete || clk.Now().Sub(t0) != time.Millisecond {
		t.Fatal("default stream work did not complete on sync")
	}
	wantCode(t, d.DestroyStream(DefaultStream), ErrParamInvalid)
}

func TestStreamEventErrors(t *testing.T) {
	d, _ := newTestDevice(t)
	s := mustStream(t, d)
	e := mustEvent(t, d)
	gone := mustStream(t, d)
	must(t, d.DestroyStream(gone))
	goneEv := mustEvent(t, d)
	must(t, d.DestroyEvent(goneEv))
	for _, bad := range []Stream{gone, 12345} {
		wantCode(t, d.DestroyStream(bad), ErrInvalidHandle)
		wantCode(t, d.Launch(bad, time.Millisecond), ErrInvalidHandle)
		wantCode(t, d.SynchronizeStream(bad), ErrInvalidHandle)
		wantCode(t, d.RecordEvent(e, bad), ErrInvalidHandle)
		wantCode(t, d.StreamWaitEvent(bad, e), ErrInvalidHandle)
		_, err := d.StreamIdleAt(bad)
		wantCode(t, err, ErrInvalidHandle)
	}
	for _, bad := range []Event{goneEv, 0, 777} {
		wantCode(t, d.DestroyEvent(bad), ErrInvalidHandle)
		wantCode(t, d.RecordEvent(bad, s), ErrInvalidHandle)
		wantCode(t, d.SynchronizeEvent(bad), ErrInvalidHandle)
		wantCode(t, d.StreamWaitEvent(s, bad), ErrInvalidHandle)
		st, err := d.QueryEvent(bad)
		wantCode(t, err, ErrInvalidHandle)
		if st != EventNotReady {
			t.Errorf("QueryEvent of a bad handle reported %v", st)
		}
	}
	wantCode(t, d.Launch(s, -time.Nanosecond), ErrParamInvalid)
	if idle, _ := d.StreamIdleAt(s); !idle.IsZero() {
		t.Fatalf("failed calls enqueued work until %v", idle)
	}
	if EventComplete.String() != "complete" || EventNotReady.String() != "not ready" {
		t.Error("EventStatus strings")
	}
}

// TestRealClockEvent runs the same protocol on the wall clock: the event is
// not complete right after launch and is complete after SynchronizeEvent.
func TestRealClockEvent(t *testing.T) {
	d, _ := NewRuntime(Config{}).Device(0)
	s := mustStream(t, d)
	e := mustEvent(t, d)
	must(t, d.Launch(s, 50*time.Millisecond))
	must(t, d.RecordEvent(e, s))
	if status(t, d, e) != EventNotReady {
		t.Fatal("50ms of work complete at once on the real clock")
	}
	must(t, d.SynchronizeEvent(e))
	if status(t, d, e) != EventComplete {
		t.Fatal("event not complete after SynchronizeEvent")
	}
}
