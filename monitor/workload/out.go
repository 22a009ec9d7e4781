package workload

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// profClock is the profiler's view of the simulated clock: epoch ns, and a
// raw value shaped like this host's CLOCK_MONOTONIC_RAW (a fixed offset
// away), so that tools pairing the host clocks read live files right.
type profClock struct {
	w    *Workload
	diff int64
}

func (c profClock) Raw() int64   { return c.w.clock.Now().UnixNano() - c.diff }
func (c profClock) Epoch() int64 { return c.w.clock.Now().UnixNano() }

// startProfiler starts a Recorder writing *_ascend_pt directories under Out
// on the schedule, with memory records fed from the allocator's trace.
func (w *Workload) startProfiler() error {
	sched := w.cfg.Profile
	if sched == nil {
		sched = &profiler.Schedule{Wait: 1, Warmup: 1, Active: 3}
	}
	w.profDiff = time.Now().UnixNano() - profiler.SystemClock.Raw()
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	rec, err := profiler.New(profiler.Config{Dir: w.cfg.Out, Worker: fmt.Sprintf("%s_%d", host, w.pid),
		Schedule: sched, ProfileMemory: true, FlushEvery: 500 * time.Millisecond,
		Clock: profClock{w, w.profDiff}, PID: uint64(w.pid), TID: uint64(w.pid)})
	if err != nil {
		return err
	}
	w.rec = rec
	w.attachMemoryTracker()
	return rec.Start()
}

// memTotals are the allocator totals after the last entry the memory
// tracker saw, kept from the entries themselves: the tracker runs behind the
// allocator, so the allocator's live Stats would be ahead of it.
type memTotals struct{ allocated, reserved, active int64 }

// attachMemoryTracker feeds the profiler's memory records from the trace.
func (w *Workload) attachMemoryTracker() {
	m := &w.mem
	w.memDetach = w.ca.AttachTracker(func(device int, e snapshot.TraceEntry) {
		switch e.Action {
		case snapshot.ActionAlloc:
			m.allocated += e.Size
			m.active += e.Size
		case snapshot.ActionFreeRequested:
			m.allocated -= e.Size
		case snapshot.ActionFree:
			m.allocated -= e.Size
			m.active -= e.Size
		case snapshot.ActionFreeCompleted:
			m.active -= e.Size
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			m.reserved += e.Size
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			m.reserved -= e.Size
		}
		if r, ok := w.rec.MemoryRecordFromTrace(device, &e, m.allocated, m.reserved, m.active); ok {
			r.TID = uint64(w.pid)
			w.rec.RecordMemory(&r)
		}
	})
}

// syncMemoryTracker waits until the tracker has delivered every entry so
// far (detach drains it), so that a step's memory records land in the
// step's profiler cycle, then attaches it again.
func (w *Workload) syncMemoryTracker() {
	if w.memDetach == nil {
		return
	}
	w.memDetach()
	w.attachMemoryTracker()
}

// snapshotPath is where a snapshot file named base goes.
func (w *Workload) snapshotPath(base string) string {
	return filepath.Join(w.cfg.Out, base+".pickle")
}

// snapWriter encodes snapshot files off the training loop, one at a time;
// a snapshot arriving while two wait is skipped (and logged), never queued
// without bound.
type snapWriter struct {
	logf  func(string, ...any)
	jobs  chan snapJob
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
	files []string
}

type snapJob struct {
	path string
	snap *snapshot.Snapshot
}

func newSnapWriter(logf func(string, ...any)) *snapWriter {
	sw := &snapWriter{logf: logf, jobs: make(chan snapJob, 2)}
	sw.wg.Add(1)
	go func() {
		defer crash.Recover()
		defer sw.wg.Done()
		for j := range sw.jobs {
			err := sw.writeFile(j)
			sw.mu.Lock()
			if err != nil && sw.err == nil {
				sw.err = err
			}
			if err == nil {
				sw.files = append(sw.files, j.path)
			}
			sw.mu.Unlock()
			if err != nil {
				logf("snapshot: %v", err)
			} else {
				logf("wrote %s", j.path)
			}
		}
	}()
	return sw
}

// writeFile writes a torch-style pickle (protocol 4, 2.x dict schema,
// time_us) through replay.WriteFile, so that a directory watcher never sees
// half a file under the final name.
func (sw *snapWriter) writeFile(j snapJob) error {
	return replay.WriteFile(j.path, j.snap, replay.WritePickle, replay.ExportDict)
}

func (sw *snapWriter) submit(path string, s *snapshot.Snapshot) {
	select {
	case sw.jobs <- snapJob{path, s}:
	default:
		sw.logf("snapshot %s skipped: the writer is behind", filepath.Base(path))
	}
}

func (sw *snapWriter) close() error {
	close(sw.jobs)
	sw.wg.Wait()
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.err
}

// Files lists the snapshot files written so far.
func (w *Workload) Files() []string {
	if w.writer == nil {
		return nil
	}
	w.writer.mu.Lock()
	defer w.writer.mu.Unlock()
	return append([]string(nil), w.writer.files...)
}

// ProfilerDirs lists the profiler cycle directories created so far.
func (w *Workload) ProfilerDirs() []string {
	if w.rec == nil {
		return nil
	}
	return w.rec.Dirs()
}
