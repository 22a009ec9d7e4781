package tui

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRunHeadlessPlays(t *testing.T) {
	o := testOptions(storeOf(t, smallSnapshot(true), smallOps()))
	o.Now = time.Now
	o.Play = true
	o.Speed = 1024 // 9 ms of trace in well under the run
	o.Tick = 10 * time.Millisecond
	loaded := false
	o.Load = func(ctx context.Context, report func(Progress)) error {
		report(Progress{Stage: "decoding"})
		loaded = true
		return nil
	}
	m, err := RunHeadless(context.Background(), o, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded || m.Loading() {
		t.Fatalf("loader did not run to the end")
	}
	if s := m.Summary(); s.Applied != 9 || m.Playing() {
		t.Fatalf("headless playback should reach the end: applied %d playing %v", s.Applied, m.Playing())
	}
}

func TestRunHeadlessLoadError(t *testing.T) {
	o := testOptions(storeOf(t, smallSnapshot(true), nil))
	o.Load = func(context.Context, func(Progress)) error { return errors.New("bad.pickle: offset 3: truncated") }
	if _, err := RunHeadless(context.Background(), o, time.Second); err == nil || err.Error() != "bad.pickle: offset 3: truncated" {
		t.Fatalf("err %v", err)
	}
}
