package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/monitor/workload"
)

// TestAttachHeadless attaches to a workload served over a real Unix socket
// and ends with the producer's totals.
func TestAttachHeadless(t *testing.T) {
	w, err := workload.New(workload.Config{Layers: 2, DeviceMem: 16 << 30, Rate: 20, Paced: true, Steps: 10})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "p.sock")
	_, stop, err := monitor.ServeAllocators("unix", sock, []*allocator.Allocator{w.Allocator()}, monitor.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	code, out, errOut := captureRun(t, "attach", "unix:"+sock, "--headless", "1s")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var s attachSummaryJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	st := w.Allocator().Stats()
	if s.Connection != "connected" || s.Received == 0 || s.MissedEntries != 0 {
		t.Errorf("connection %+v", s)
	}
	if s.ReservedBytes != st.ReservedBytes[0].Current || s.ActiveBytes != st.RequestedBytes[0].Current ||
		int64(s.Segments) != st.Segment[0].Current {
		t.Errorf("attach saw reserved %d active %d segments %d; allocator has %d %d %d", s.ReservedBytes, s.ActiveBytes,
			s.Segments, st.ReservedBytes[0].Current, st.RequestedBytes[0].Current, st.Segment[0].Current)
	}
}

// TestAttachNothingListening: with no producer the headless run still
// ends, reporting a connection that never came up.
func TestAttachNothingListening(t *testing.T) {
	var s attachSummaryJSON
	runJSON(t, &s, "attach", "unix:"+filepath.Join(t.TempDir(), "none.sock"), "--headless", "300ms")
	if s.Connection == "connected" || s.Entries != 0 {
		t.Fatalf("summary %+v", s)
	}
}
