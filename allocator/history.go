package allocator

import (
	"iter"
	"sync"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
)

// RecordContext is how much stack context is kept (torch RecordContext).
type RecordContext uint8

const (
	RecordNever RecordContext = iota // no stacks
	RecordState                      // stacks of live allocations only (snapshot blocks)
	RecordAlloc                      // + stacks on alloc trace entries
	RecordAll                        // + stacks on free entries
)

// rawEntry is a trace entry as recorded on the hot path: a tick instead of
// epoch time, 40 bytes instead of TraceEntry's 112.
type rawEntry struct {
	tick   int64
	addr   uint64 // oom: device free bytes
	size   int64
	stream acl.Stream
	frames snapshot.StackID
	action snapshot.Action
}

// actionFreePair marks a ring slot that holds two entries: the
// free_requested and free_completed of a Free whose block went back to its
// pool at once, equal in every field but the action. A slot fewer per
// such Free is a third less ring memory written by a Malloc+Free pair. It
// exists only in the ring: trackers get the two entries, and so does
// entries().
const actionFreePair snapshot.Action = 255

// count is how many trace entries a slot holds.
func (e *rawEntry) count() int {
	if e.action == actionFreePair {
		return 2
	}
	return 1
}

// ring is TraceEntryRingBuffer: append until full, then overwrite the
// oldest; entries() returns the last max entries, oldest first. It has max
// slots, so with slots of two entries (actionFreePair) it holds more than
// max entries, and entries() leaves out the oldest surplus.
type ring struct {
	buf  []rawEntry
	max  int
	next int
}

func (r *ring) reset(maxEntries int) {
	r.max = max(1, maxEntries)
	r.buf = make([]rawEntry, 0, min(r.max, 1<<16))
	r.next = 0
}

func (r *ring) push(e rawEntry) { *r.slot() = e }

// slot returns the slot the next entry goes to.
func (r *ring) slot() *rawEntry {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, rawEntry{})
		return &r.buf[len(r.buf)-1]
	}
	e := &r.buf[r.next]
	r.next++
	if r.next == r.max {
		r.next = 0
	}
	return e
}

// entries returns the number of entries the ring holds — the newest max
// of those its slots hold — and an iterator over them, oldest first, a
// pair slot yielding its two entries. Snapshot converts them as they come,
// without a copy of the ring.
func (r *ring) entries() (int, iter.Seq[rawEntry]) {
	n := 0
	for i := range r.buf {
		n += r.buf[i].count()
	}
	skip := max(0, n-r.max)
	return n - skip, func(yield func(rawEntry) bool) {
		skip := skip
		for _, part := range [2][]rawEntry{r.buf[r.next:], r.buf[:r.next]} {
			for _, e := range part {
				if e.action == actionFreePair {
					e.action = snapshot.ActionFreeRequested
					if skip > 0 {
						skip--
					} else if !yield(e) {
						return
					}
					e.action = snapshot.ActionFreeCompleted
				}
				if skip > 0 {
					skip--
				} else if !yield(e) {
					return
				}
			}
		}
	}
}

// DefaultTrackerBuffer is the number of entries a tracker may fall behind
// before entries are dropped.
const DefaultTrackerBuffer = 1 << 16

// TrackerOption configures AttachTracker.
type TrackerOption func(*tracker)

// WithTrackerBuffer sets how many entries may wait for a slow tracker.
func WithTrackerBuffer(n int) TrackerOption {
	return func(t *tracker) { t.limit = max(1, n) }
}

// WithDropHandler is called (on the tracker's goroutine, before the next
// delivered entry) with the number of entries dropped because the tracker
// fell more than its buffer behind.
func WithDropHandler(fn func(dropped uint64)) TrackerOption {
	return func(t *tracker) { t.onDrop = fn }
}

// tracker delivers entries to one callback on its own goroutine. The
// allocator only appends to a bounded buffer under the tracker's mutex, so
// a slow or blocked callback costs drops, never allocator latency.
type tracker struct {
	fn     func(device int, e snapshot.TraceEntry)
	batch  func(device int, es []snapshot.TraceEntry) // instead of fn: entries in batches
	onDrop func(uint64)
	limit  int

	mu      sync.Mutex
	buf     []rawEntry
	dropped uint64
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

func (t *tracker) push(e rawEntry) {
	t.mu.Lock()
	wasIdle := len(t.buf) == 0 && t.dropped == 0
	if len(t.buf) >= t.limit {
		t.dropped++
	} else {
		t.buf = append(t.buf, e)
	}
	t.mu.Unlock()
	if wasIdle { // the deliverer drains everything per wake-up: signal once per batch
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// run delivers batches until closed and drained.
func (t *tracker) run(a *Allocator) {
	defer close(t.done)
	var batch []rawEntry
	var out []snapshot.TraceEntry
	var conv converter
	var convAt time.Time
	for {
		<-t.wake
		for {
			t.mu.Lock()
			batch, t.buf = t.buf, batch[:0]
			dropped := t.dropped
			t.dropped = 0
			closed := t.closed
			t.mu.Unlock()
			if dropped > 0 && t.onDrop != nil {
				t.onDrop(dropped)
			}
			if len(batch) > 0 {
				if convAt.IsZero() || time.Since(convAt) > 100*time.Millisecond {
					conv, convAt = a.clk.converter(), time.Now()
				}
				if t.batch == nil {
					for i := range batch {
						t.fn(a.device, a.convert(batch[i], conv))
					}
					continue
				}
				for lo := 0; lo < len(batch); lo += maxTrackerBatch {
					out = out[:0]
					for _, r := range batch[lo:min(len(batch), lo+maxTrackerBatch)] {
						out = append(out, a.convert(r, conv))
					}
					t.batch(a.device, out)
				}
				continue
			}
			if closed {
				return
			}
			break
		}
	}
}

// AttachTracker registers fn to see every trace entry as it is recorded,
// with TimeUS in epoch µs, whether or not history is on. fn runs on a
// goroutine of its own, in record order; up to the buffer size (default
// DefaultTrackerBuffer) entries wait for it, further ones are dropped and
// reported through WithDropHandler. detach stops recording for fn, waits
// until the buffered entries are delivered and returns; it must not be
// called from fn itself.
func (a *Allocator) AttachTracker(fn func(device int, e snapshot.TraceEntry), opts ...TrackerOption) (detach func()) {
	t := a.newTracker(fn, opts)
	a.mu.Lock()
	a.trackers = append(a.trackers, t)
	a.syncFastRecord()
	a.mu.Unlock()
	return a.detacher(t)
}

// maxTrackerBatch caps the entries AttachBatchTracker's fn gets at once.
const maxTrackerBatch = 4096

// AttachBatchTracker is AttachTracker for a fn that takes the entries in
// batches, as many at a time (at most 4,096) as waited for it: one call
// where AttachTracker makes one per entry. es is reused after fn returns.
func (a *Allocator) AttachBatchTracker(fn func(device int, es []snapshot.TraceEntry), opts ...TrackerOption) (detach func()) {
	t := a.newTracker(nil, append(opts, func(t *tracker) { t.batch = fn }))
	a.mu.Lock()
	a.trackers = append(a.trackers, t)
	a.syncFastRecord()
	a.mu.Unlock()
	return a.detacher(t)
}

func (a *Allocator) newTracker(fn func(device int, e snapshot.TraceEntry), opts []TrackerOption) *tracker {
	t := &tracker{fn: fn, limit: DefaultTrackerBuffer, wake: make(chan struct{}, 1), done: make(chan struct{})}
	for _, o := range opts {
		o(t)
	}
	go func() { defer crash.Recover(); t.run(a) }()
	return t
}

func (a *Allocator) detacher(t *tracker) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			for i, x := range a.trackers {
				if x == t {
					a.trackers = append(a.trackers[:i:i], a.trackers[i+1:]...)
					break
				}
			}
			a.syncFastRecord()
			a.mu.Unlock()
			t.mu.Lock()
			t.closed = true
			t.mu.Unlock()
			select {
			case t.wake <- struct{}{}:
			default:
			}
			<-t.done
		})
	}
}

// AttachOOMObserver registers fn, called after an OOM is recorded and the
// allocator lock released, before Malloc returns the OOMError:
// fn(device, allocSize, allowedOrTotal, deviceFree).
func (a *Allocator) AttachOOMObserver(fn func(device int, allocSize, allowedOrTotal, deviceFree int64)) (detach func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	id := a.nextObserver
	a.nextObserver++
	a.oomObservers = append(a.oomObservers, oomObserver{id, fn})
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for i, o := range a.oomObservers {
			if o.id == id {
				a.oomObservers = append(a.oomObservers[:i:i], a.oomObservers[i+1:]...)
				return
			}
		}
	}
}

type oomObserver struct {
	id int
	fn func(device int, allocSize, allowedOrTotal, deviceFree int64)
}

// RecordHistory turns the trace ring buffer on or off. ctx sets which
// stacks are kept (frames come from MallocWithStack / FreeWithStack);
// maxEntries caps the ring (≤ 0 means 1, as in torch). Like torch_npu, every
// call clears the recorded history.
func (a *Allocator) RecordHistory(enabled bool, ctx RecordContext, maxEntries int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.history = enabled
	a.level = RecordNever
	if enabled {
		a.level = ctx
	}
	a.stackMask = snapshot.NoStack
	if a.level >= RecordAlloc { // trace entries keep their stacks
		a.stackMask = ^snapshot.NoStack
	}
	a.ring.reset(maxEntries)
	a.syncFastRecord()
}

// record is record_trace: nothing unless history is on or a tracker is
// attached. a.mu held.
//
// The fast path (recordFast) — history only, the call's tick read
// (stampCall), the ring full and wrapping, as it is after its first
// maxEntries entries — writes one ring slot and calls nothing; anything
// else goes to recordSlow. record itself is too big for the compiler to
// inline, so the entries of a cache-hit Malloc and Free (allocFoundBlock,
// FreeWithStack) spell it out, a call less per entry with history on or
// off.
func (a *Allocator) record(action snapshot.Action, addr uint64, size int64, stream acl.Stream, ctx snapshot.StackID) {
	if a.recordFast() {
		a.ring.put(a.stampAt, addr, size, stream, ctx&a.stackMask, action)
	} else if a.recording() {
		a.recordSlow(action, addr, size, stream, ctx)
	}
}

// recordFast is whether record takes its fast path.
func (a *Allocator) recordFast() bool { return a.fastRecord && a.stampAt != 0 }

// put overwrites the oldest entry of a full ring.
func (r *ring) put(tick int64, addr uint64, size int64, stream acl.Stream, ctx snapshot.StackID, action snapshot.Action) {
	e := &r.buf[r.next]
	if r.next++; r.next == r.max {
		r.next = 0
	}
	// Field by field: a composite literal is built on the stack and copied
	// in 16-byte moves that cannot forward from its narrower stores, a
	// stall per entry.
	e.tick, e.addr, e.size, e.stream, e.frames, e.action = tick, addr, size, stream, ctx, action
}

// syncFastRecord updates a.fastRecord after a change to the history, the
// trackers or the ring's length. a.mu held.
func (a *Allocator) syncFastRecord() {
	a.fastRecord = a.history && len(a.trackers) == 0 && len(a.ring.buf) == a.ring.max
}

// recordSlow is record off its fast path: the entry goes to each tracker's
// buffer and, with history on, to the ring.
func (a *Allocator) recordSlow(action snapshot.Action, addr uint64, size int64, stream acl.Stream, ctx snapshot.StackID) {
	ctx &= a.stackMask
	t := a.stamp()
	if len(a.trackers) == 0 {
		e := a.ring.slot()
		e.tick, e.addr, e.size, e.stream, e.frames, e.action = t, addr, size, stream, ctx, action
		a.syncFastRecord()
		return
	}
	e := rawEntry{tick: t, addr: addr, size: size, stream: stream, frames: ctx, action: action}
	for _, tr := range a.trackers {
		if action == actionFreePair {
			e.action = snapshot.ActionFreeRequested
			tr.push(e)
			e.action = snapshot.ActionFreeCompleted
		}
		tr.push(e)
		e.action = action
	}
	if a.history {
		a.ring.push(e)
	}
}

// convert turns a raw entry into the snapshot model.
func (a *Allocator) convert(e rawEntry, c converter) snapshot.TraceEntry {
	te := snapshot.TraceEntry{Action: e.action, Size: e.size, Stream: uint64(e.stream), Frames: e.frames, TimeUS: c.micros(e.tick)}
	if e.action == snapshot.ActionOOM {
		te.DeviceFree = int64(e.addr)
	} else {
		te.Addr = e.addr
	}
	return te
}
