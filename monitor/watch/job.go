package watch

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/monitor/classify"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// LoadJob reads a job's dump directory, resolved by classify.ResolveJob,
// into st: its snapshot's memory data with the ops of every profiler run of
// the same process, on one time axis. As in a watched directory, the
// snapshot's own step annotations give way to the runs' ops when there are
// runs (the runs' ProfilerStep#N ranges are the same steps). With no
// snapshot, the newest run is loaded as Load loads it. Loaded holds the
// snapshot's Capture, or the lone run's data.
func LoadJob(ctx context.Context, j classify.Job, st *store.Store, o LoadOptions) (Loaded, error) {
	if j.Snapshot == "" {
		if len(j.Runs) == 0 {
			return Loaded{}, fmt.Errorf("%s: nothing to open", j.Dir)
		}
		return Load(ctx, j.Runs[0], st, o)
	}
	lo := o
	lo.MemoryOnly = o.MemoryOnly || len(j.Runs) > 0
	l, err := Load(ctx, j.Snapshot, st, lo)
	if err != nil || o.MemoryOnly {
		return l, err
	}
	for _, r := range j.Runs {
		d, err := profiler.ReadDirContext(ctx, r)
		if err != nil {
			return l, err
		}
		st.IngestOps(RunOps(d))
	}
	return l, nil
}

// JobCaptures lists a resolved job directory's captures (its snapshots and
// profiler runs, oldest first) for a capture picker, and opens one's memory
// data into a Store; the ops LoadJob read stay. Nothing is watched: the
// list is the directory as it was resolved (watch DIR follows one live).
type JobCaptures struct {
	st   *store.Store
	o    LoadOptions
	mu   sync.Mutex
	list []capture.Entry
	open string
	// OnOpen, when set, is given the capture Open loaded (nil for a
	// profiler run), so what works on the open snapshot — the what-if
	// view, the side files beside it — follows the picker.
	OnOpen func(*replay.Capture)
}

// NewJobCaptures lists j's captures; the open one is j's snapshot (or run).
func NewJobCaptures(j classify.Job, st *store.Store, o LoadOptions) *JobCaptures {
	c := &JobCaptures{st: st, o: o}
	c.o.MemoryOnly = true
	add := func(kind capture.Kind, p string) {
		e := capture.Entry{Kind: kind, Path: p, Existing: true}
		if fi, err := os.Stat(p); err == nil {
			e.Arrived, e.Size = fi.ModTime(), fi.Size()
		}
		if kind == capture.Profiler {
			e.Size = treeSize(p)
		}
		c.list = append(c.list, e)
	}
	for _, p := range j.Snapshots {
		add(capture.Snapshot, p)
	}
	for _, p := range j.AllRuns {
		add(capture.Profiler, p)
	}
	Number(c.list)
	c.open = j.Open()
	return c
}

// List returns the captures oldest first, the open one marked.
func (c *JobCaptures) List() []capture.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]capture.Entry, len(c.list))
	for i, e := range c.list {
		e.Open = e.Path == c.open
		out[i] = e
	}
	return out
}

// Open makes the capture at path the one whose memory data is shown.
func (c *JobCaptures) Open(path string) error {
	c.mu.Lock()
	i := c.index(path)
	c.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("%s: not a capture of this directory", path)
	}
	l, err := Load(context.Background(), path, c.st, c.o)
	c.mu.Lock()
	if err != nil {
		c.list[i].Error = err.Error()
		c.mu.Unlock()
		return err
	}
	c.list[i].Error, c.open = "", path
	on := c.OnOpen
	c.mu.Unlock()
	if on != nil {
		on(l.Capture)
	}
	return nil
}

func (c *JobCaptures) index(path string) int {
	for i := range c.list {
		if c.list[i].Path == path {
			return i
		}
	}
	return -1
}
