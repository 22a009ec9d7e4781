package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/monitor/attach"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
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
	_, stop, err := attach.Serve("unix", sock, []*allocator.Allocator{w.Allocator()}, wire.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // only bounds a hang
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	att := startAttach(t, "unix:"+sock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := w.Allocator().Stats()
	// the attach ends once it holds the finished workload's state (exit
	// status and output as at the end of its --headless time)
	s := att.until(t, "the workload's last state", func(_ wire.ClientStatus, got *store.Store) bool {
		sum := got.Summary(0, math.MaxInt64)
		return sum.ReservedBytes == st.ReservedBytes[0].Current && sum.ActiveBytes == st.RequestedBytes[0].Current &&
			int64(sum.Segments) == st.Segment[0].Current
	})
	if s.Connection != "connected" || s.Received == 0 || s.MissedEntries != 0 {
		t.Errorf("connection %+v", s)
	}
	if s.ReservedBytes != st.ReservedBytes[0].Current || s.ActiveBytes != st.RequestedBytes[0].Current ||
		s.Segments == nil || int64(*s.Segments) != st.Segment[0].Current {
		t.Errorf("attach saw reserved %d active %d segments %v; allocator has %d %d %d", s.ReservedBytes, s.ActiveBytes,
			s.Segments, st.ReservedBytes[0].Current, st.RequestedBytes[0].Current, st.Segment[0].Current)
	}
	// the producer sends its own peaks in HELLO: they cover the whole
	// process, not only what happened since attach
	if s.PeakScope != "process" || s.PeakActiveBytes != st.RequestedBytes[0].Peak || s.PeakReservedBytes != st.ReservedBytes[0].Peak {
		t.Errorf("peaks %d / %d (%s); the producer's are %d / %d", s.PeakActiveBytes, s.PeakReservedBytes, s.PeakScope,
			st.RequestedBytes[0].Peak, st.ReservedBytes[0].Peak)
	}
}

// TestAttachNothingListening: with no producer the headless run still
// ends, prints the summary, and exits 1 with the reason.
func TestAttachNothingListening(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	// the run ends once the client has tried the socket (however long a
	// loaded machine takes to get there); the minute only bounds a hang
	stop := make(chan struct{})
	defer close(stop)
	attachWatch = func(c *wire.Client, _ *store.Store, end func()) {
		go func() {
			for c.Status().Err == nil {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
			end()
		}()
	}
	defer func() { attachWatch = nil }()
	code, out, errOut := captureRun(t, "attach", "unix:"+sock, "--headless", "1m")
	if code != exitFail || !strings.Contains(errOut, "never connected") || !strings.Contains(errOut, "no such file") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var s attachSummaryJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if s.Connection == "connected" || s.Entries != 0 || !strings.Contains(s.Error, "no such file") {
		t.Fatalf("summary %+v", s)
	}
}

// TestAttachSeveralHeadless: two producers on sockets matched by one glob
// come out as two rows of the ranks overview, in sorted socket order, each
// with its own producer's totals.
func TestAttachSeveralHeadless(t *testing.T) {
	dir := t.TempDir()
	var allocs []*allocator.Allocator
	for i, layers := range []int{2, 3} {
		w := finishedWorkload(t, workload.Config{Layers: layers, DeviceMem: 8 << 30, Steps: 2, Seed: uint64(i)})
		_, stop, err := attach.Serve("unix", filepath.Join(dir, fmt.Sprintf("p%d.sock", i)),
			[]*allocator.Allocator{w.Allocator()}, wire.ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		allocs = append(allocs, w.Allocator())
	}
	var s struct {
		Ranks []struct {
			Rank          int   `json:"rank"`
			ReservedBytes int64 `json:"reserved_bytes"`
			ActiveBytes   int64 `json:"active_bytes"`
		} `json:"ranks"`
		Imbalance []struct {
			Figure string `json:"figure"`
		} `json:"imbalance"`
	}
	runJSON(t, &s, "attach", "--headless", "2s", "unix:"+filepath.Join(dir, "p*.sock"))
	if len(s.Ranks) != 2 || len(s.Imbalance) != 3 {
		t.Fatalf("%+v", s)
	}
	for i, a := range allocs {
		st := a.Stats()
		if r := s.Ranks[i]; r.Rank != i || r.ReservedBytes != st.ReservedBytes[0].Current || r.ActiveBytes != st.RequestedBytes[0].Current {
			t.Errorf("process %d: %+v; allocator reserved %d requested %d", i, r, st.ReservedBytes[0].Current, st.RequestedBytes[0].Current)
		}
	}
	if code, _, errOut := captureRun(t, "attach", "unix:"+filepath.Join(dir, "none*.sock")); code != exitUsage || !strings.Contains(errOut, "no socket matches") {
		t.Errorf("empty glob: exit %d %q", code, errOut)
	}
}
