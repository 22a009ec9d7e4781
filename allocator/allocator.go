package allocator

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

// Allocator is a caching allocator for one device. All methods are safe for
// concurrent use.
type Allocator struct {
	mu      sync.Mutex
	dev     *acl.Device
	device  int
	cfg     config.Config
	flavour config.Flavour // cfg.Flavour, immutable: readable without the lock
	clk     *approxClock
	now     func() int64
	counter bool // now is cycleCounter

	small, large blockPool
	active       ptrTable // allocated or pending-free blocks by ptr
	expandables  []*expandableSegment

	// totalAllocated is total_allocated_memory: reserved bytes including
	// mapped expandable pages; the fraction limit and GC look at it.
	totalAllocated int64
	deviceTotal    int64
	fractionSet    bool
	allowedMax     int64

	events        map[acl.Stream][]pendingEvent
	pendingEvents int
	freeEvents    []acl.Event

	tab     blockTable // every block struct by id (poolKey.id)
	spare   []*block   // recycled block structs
	stampAt int64      // tick shared by the entries of the current call; 0 = not read yet

	stats    Stats
	warnings []string
	fault    error // first unexpected acl failure in a release path

	history bool
	level   RecordContext
	ring    ring
	// fastRecord is record's fast path condition: history on, no
	// trackers, the ring full (syncFastRecord keeps it).
	fastRecord bool
	// stackMask is ANDed with a trace entry's StackID: all ones where
	// entries keep their stacks (RecordAlloc and up), else NoStack (0).
	stackMask snapshot.StackID
	stackMu   sync.RWMutex
	stacks    *snapshot.StackTable
	trackers  []*tracker

	oomObservers []oomObserver
	nextObserver int
}

type pendingEvent struct {
	ev acl.Event
	b  *block
}

// Option configures New.
type Option func(*Allocator)

// WithClock takes trace timestamps from c (e.g. the acl runtime's manual
// clock in simulations) instead of the calibrated cycle counter. Reading
// an injected clock costs more than a tick but needs no calibration.
func WithClock(c acl.Clock) Option {
	return func(a *Allocator) {
		if c == nil || c == acl.RealClock() {
			return
		}
		a.clk = newExactClock(func() int64 { return c.Now().UnixNano() })
	}
}

// ErrOutOfMemory matches every *OOMError with errors.Is.
var ErrOutOfMemory = errors.New("out of memory")

// ErrInvalidPointer is returned for a pointer the allocator did not hand out
// or that is already freed.
var ErrInvalidPointer = errors.New("invalid device pointer")

// OOMError is the out-of-memory error, with the figures torch prints.
type OOMError struct {
	Device        int
	RequestedSize int64 // the caller's size
	AllocSize     int64 // the segment size that could not be obtained
	TotalCapacity int64
	DeviceFree    int64
	Allowed       int64 // memory fraction limit; valid when AllowedSet
	AllowedSet    bool
	Allocated     int64 // allocated_bytes.all.current
	Active        int64 // active_bytes.all.current
	Reserved      int64 // reserved_bytes.all.current
	Rejected      bool  // NPU throw_on_npumalloc_oom preemptive rejection
	msg           string
}

func (e *OOMError) Error() string { return e.msg }

// Is makes errors.Is(err, ErrOutOfMemory) true.
func (e *OOMError) Is(target error) bool { return target == ErrOutOfMemory }

// New returns an allocator on dev. A zero Config means DefaultConfig(FlavourNPU).
func New(dev *acl.Device, cfg config.Config, opts ...Option) (*Allocator, error) {
	if dev == nil {
		return nil, errors.New("allocator: nil device")
	}
	if cfg.MaxSplitSize == 0 {
		raw, f := cfg.Raw, cfg.Flavour
		cfg = config.DefaultConfig(f)
		cfg.Raw = raw
	}
	_, total, err := dev.GetMemInfo(acl.MemHBM)
	if err != nil {
		return nil, fmt.Errorf("allocator: %w", err)
	}
	a := &Allocator{
		dev: dev, device: dev.ID(), cfg: cfg, flavour: cfg.Flavour, deviceTotal: total,
		small:  blockPool{small: true},
		events: make(map[acl.Stream][]pendingEvent),
		stacks: snapshot.NewStackTable(),
	}
	a.small.tab, a.large.tab = &a.tab, &a.tab
	a.ring.reset(1)
	for _, o := range opts {
		o(a)
	}
	if a.clk == nil {
		a.clk = newApproxClock(tickSource())
		a.counter = counterUsable()
	}
	a.now = a.clk.read
	a.stats.MaxSplitSize = cfg.MaxSplitSize
	if cfg.MaxSplitSize == config.Unlimited {
		a.stats.MaxSplitSize = -1
	}
	if cfg.Flavour == config.FlavourNPU {
		if cfg.MemoryFraction < 1 {
			a.setFraction(cfg.MemoryFraction)
		}
		if cfg.ExpandableSegments {
			// torch_npu probes the VMM API once and falls back when it fails.
			va, err := dev.ReserveMemAddress(acl.Granularity, 0, 0, 1)
			if err != nil {
				a.cfg.ExpandableSegments = false
				a.warnings = append(a.warnings, "expandable_segments setting failure, now change to `False`.")
			} else {
				_ = dev.ReleaseMemAddress(va)
			}
		}
	}
	return a, nil
}

// Device returns the device ordinal.
func (a *Allocator) Device() int { return a.device }

// Config returns the configuration in effect.
func (a *Allocator) Config() config.Config {
	a.lock()
	defer a.mu.Unlock()
	return a.cfg
}

// Warnings returns the warnings torch would have logged (once each).
func (a *Allocator) Warnings() []string {
	a.lock()
	defer a.mu.Unlock()
	return slices.Clone(a.warnings)
}

func (a *Allocator) warnOnce(w string) {
	if !slices.Contains(a.warnings, w) {
		a.warnings = append(a.warnings, w)
	}
}

// Stack resolves a StackID of a trace entry or block; safe to call from a
// tracker.
func (a *Allocator) Stack(id snapshot.StackID) snapshot.Stack {
	a.stackMu.RLock()
	defer a.stackMu.RUnlock()
	st := a.stacks.Stacks()
	if id <= 0 || int(id) >= len(st) {
		return nil
	}
	return st[id]
}

// intern returns the context of frames at the level at which it is kept.
func (a *Allocator) intern(frames []snapshot.Frame, need RecordContext) snapshot.StackID {
	if len(frames) == 0 || a.level < need {
		return snapshot.NoStack
	}
	a.stackMu.Lock()
	defer a.stackMu.Unlock()
	return a.stacks.Intern(frames)
}

// stat applies delta to the "all" entry and the pool's entry of arr.
func stat(arr *StatArray, p *blockPool, delta int64) { arr.add(p.stat(), delta) }

// stat is the pool's StatArray index.
func (p *blockPool) stat() int {
	if p.small {
		return StatSmall
	}
	return StatLarge
}

// allocParams is AllocParams: the search key and the outcome.
type allocParams struct {
	size      int64 // rounded
	allocSize int64
	stream    acl.Stream
	pool      *blockPool
	block     *block
	err       error // last device error; ErrMemoryAllocation for limits
	rejected  bool  // throw_on_npumalloc_oom
	// at is block's position in pool.blocks when getFreeBlock found it:
	// allocFoundBlock then takes it out, or puts the split remainder in its
	// place.
	at     cursor
	inPool bool
}

// Malloc allocates size bytes for use on stream and returns the device
// address. It returns an *OOMError when the retry chain fails. Like torch,
// a zero-byte request returns address 0 without touching the cache.
func (a *Allocator) Malloc(size int64, stream acl.Stream) (uint64, error) {
	return a.MallocWithStack(size, stream, nil)
}

// MallocWithStack is Malloc with the caller's stack (innermost first), kept
// according to the RecordHistory context.
func (a *Allocator) MallocWithStack(size int64, stream acl.Stream, frames []snapshot.Frame) (uint64, error) {
	if size <= 0 {
		if size < 0 {
			return 0, fmt.Errorf("allocator: negative size %d", size)
		}
		return 0, nil
	}
	if size >= config.OneExaBytes {
		kind := "NPU"
		if a.flavour == config.FlavourCUDA {
			kind = "CUDA"
		}
		return 0, &OOMError{Device: a.device, RequestedSize: size, msg: kind + " out of memory. Tried to allocate more than 1EB memory."}
	}
	a.lock()
	if a.recording() {
		if a.counter {
			a.stampAt = cycleCounter() // stampCall's common case, spelled out: a call less
		} else {
			a.stampCall()
		}
	}
	ctx := a.intern(frames, RecordState)
	lazy := a.cfg.Flavour == config.FlavourNPU && a.cfg.MultiStreamLazyReclaim
	if !lazy || a.pendingEvents > 512 {
		a.processEvents(ctx)
	}
	rounded := a.cfg.RoundSize(size)
	p := allocParams{size: rounded, stream: stream, pool: &a.large}
	if rounded <= config.SmallSize {
		p.pool = &a.small
	}
	p.allocSize = a.cfg.AllocationSize(rounded)

	found := a.getFreeBlock(&p)
	if !found && lazy {
		a.processEvents(ctx)
		found = a.getFreeBlock(&p)
	}
	if !found {
		if a.gcEnabled() {
			a.garbageCollect(ctx)
		}
		found = a.allocBlock(&p, false, ctx) ||
			(p.fatal() == nil && !p.rejected && a.releaseAvailableCached(&p, ctx) && a.allocBlock(&p, false, ctx))
		if !found && p.fatal() == nil && !p.rejected {
			if a.cfg.Flavour == config.FlavourNPU {
				// "Get a block from the existing pool failed. Try to free
				// cached blocks and reallocate. This error log can be ignored."
				a.syncDevice()
			}
			found = a.releaseCachedBlocks(ctx) && a.allocBlock(&p, true, ctx)
		}
	}
	if !found {
		return 0, a.failMalloc(&p, size, ctx) // unlocks
	}
	b := a.allocFoundBlock(&p, size, ctx)
	a.mu.Unlock()
	return b.ptr, nil
}

// fatal returns a device error that is not out-of-memory.
func (p *allocParams) fatal() error {
	if p.err != nil && !errors.Is(p.err, acl.ErrMemoryAllocation) {
		return p.err
	}
	return nil
}

// failMalloc builds the OOM (or passes a device error through), records the
// oom entry with the failing request's stack (as torch's record_trace
// does), unlocks and calls the OOM observers. a.mu held on entry.
func (a *Allocator) failMalloc(p *allocParams, size int64, ctx snapshot.StackID) error {
	if err := p.fatal(); err != nil {
		a.mu.Unlock()
		return fmt.Errorf("allocator: %w", err)
	}
	free, total, err := a.dev.GetMemInfo(acl.MemHBM)
	if err != nil {
		a.mu.Unlock()
		return fmt.Errorf("allocator: %w", err)
	}
	e := &OOMError{
		Device: a.device, RequestedSize: size, AllocSize: p.allocSize,
		TotalCapacity: total, DeviceFree: free, Allowed: a.allowedMax, AllowedSet: a.fractionSet,
		Allocated: a.stats.AllocatedBytes[StatAll].Current,
		Active:    a.stats.ActiveBytes[StatAll].Current,
		Reserved:  a.stats.ReservedBytes[StatAll].Current,
		Rejected:  p.rejected,
	}
	if p.rejected {
		e.msg = "NPU out of memory. Allocation was preemptively rejected because it would exceed per_process_memory_fraction limit. Requested size: " + bytesize.Torch(p.allocSize)
		a.mu.Unlock()
		return e
	}
	a.stats.NumOOMs++
	a.record(snapshot.ActionOOM, uint64(free), p.size, p.stream, ctx)
	e.msg = a.oomMessage(e)
	limit := total
	if a.fractionSet {
		limit = a.allowedMax
	}
	obs := slices.Clone(a.oomObservers)
	a.mu.Unlock()
	for _, o := range obs {
		o.fn(a.device, p.allocSize, limit, free)
	}
	return e
}

func (a *Allocator) oomMessage(e *OOMError) string {
	allowed := ""
	if e.AllowedSet {
		allowed = bytesize.Torch(e.Allowed) + " allowed; "
	}
	if a.cfg.Flavour == config.FlavourCUDA {
		return fmt.Sprintf("CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. "+
			"%sOf the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated. "+
			"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "+
			"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
			bytesize.Torch(e.AllocSize), e.Device, bytesize.Torch(e.TotalCapacity), bytesize.Torch(e.DeviceFree),
			allowed, bytesize.Torch(e.Allocated), bytesize.Torch(e.Reserved-e.Allocated))
	}
	return fmt.Sprintf("NPU out of memory. Tried to allocate %s (NPU %d; %s total capacity; %s already allocated; "+
		"%s current active; %s free; %s%s reserved in total by PyTorch).If reserved memory is >> allocated memory "+
		"try setting max_split_size_mb to avoid fragmentation.",
		bytesize.Torch(e.AllocSize), e.Device, bytesize.Torch(e.TotalCapacity), bytesize.Torch(e.Allocated),
		bytesize.Torch(e.Active), bytesize.Torch(e.DeviceFree), allowed, bytesize.Torch(e.Reserved))
}

func (a *Allocator) gcEnabled() bool { return a.fractionSet && a.cfg.GCThreshold > 0 }

// getFreeBlock is get_free_block: best fit on the same stream, with the
// expandable and oversize rules.
func (a *Allocator) getFreeBlock(p *allocParams) bool {
	pool := p.pool
	set := &pool.blocks
	if a.gcEnabled() {
		for b := range pool.freeBlocks() {
			b.gcCount++
		}
	}
	at := set.seek(poolKey{stream: p.stream, size: p.size})
	if !set.valid(at) || set.key(at).stream != p.stream {
		return false
	}
	b := pool.at(at)
	if b.expandable != nil {
		if a.cfg.ExpandableSegments {
			// Best fit counts what a block can grow into: its size plus an
			// unmapped block right after it.
			grow := func(b *block) int64 {
				if b.next != nil && !b.next.mapped {
					return b.size + b.next.size
				}
				return b.size
			}
			for b.expandable != nil {
				n := set.next(at)
				if !set.valid(n) || set.key(n).stream != p.stream {
					break
				}
				nb := pool.at(n)
				if grow(nb) >= grow(b) {
					break
				}
				at, b = n, nb
			}
		} else {
			// Expandable segments were turned off: only plain blocks qualify.
			for {
				at = set.next(at)
				if !set.valid(at) || set.key(at).stream != p.stream || pool.at(at).expandable == nil {
					break
				}
			}
			if !set.valid(at) || set.key(at).stream != p.stream {
				return false
			}
			b = pool.at(at)
		}
	}
	maxSplit := a.cfg.MaxSplitSize
	if p.size < maxSplit && b.size >= maxSplit {
		return false // don't hand an oversize block to a normal request
	}
	if p.size >= maxSplit && b.size >= p.size+a.cfg.MaxNonSplitRounding {
		return false // too much waste for an oversize request
	}
	b.gcCount = 0
	p.block, p.at, p.inPool = b, at, true
	return true
}

// shouldSplit is should_split.
func (a *Allocator) shouldSplit(b *block, size int64) bool {
	remaining := b.size - size
	if b.pool.small || a.cfg.ExpandableSegments {
		return remaining >= config.MinBlockSize
	}
	return size < a.cfg.MaxSplitSize && remaining > config.SmallSize
}

// allocFoundBlock is alloc_found_block: optional NPU base-address
// alignment, the split (front part is handed out), stats and the trace.
func (a *Allocator) allocFoundBlock(p *allocParams, orig int64, ctx snapshot.StackID) *block {
	b := p.block
	pool := b.pool
	size := p.size
	if a.cfg.Flavour == config.FlavourNPU && a.cfg.ExpandableSegments && size >= config.SmallBuffer && a.cfg.BaseAddrAlignedKB != 0 {
		al := uint64(a.cfg.BaseAddrAlignedKB * config.KiB)
		aligned := (b.ptr + al - 1) / al * al
		if off := int64(aligned - b.ptr); off > 0 && off+size <= b.size {
			if p.inPool {
				pool.blocks.delete(p.at)
				p.inPool = false
			}
			lead := a.newBlock(b.ptr, off, b.stream, pool, true, b.expandable)
			lead.linkBefore(b)
			b.ptr, b.size = aligned, b.size-off
			pool.insert(lead)
		}
	}
	alreadySplit := b.isSplit()
	if a.shouldSplit(b, size) {
		rem := b
		b = a.newBlock(rem.ptr, size, rem.stream, pool, true, rem.expandable)
		b.linkBefore(rem)
		rem.ptr += uint64(size)
		rem.size -= size
		if p.inPool {
			pool.blocks.update(p.at, rem.key()) // the remainder keeps the block's id
		} else {
			pool.insert(rem)
		}
		if rem.expandable == nil {
			if alreadySplit {
				stat(&a.stats.InactiveSplitBytes, pool, -b.size)
			} else {
				stat(&a.stats.InactiveSplitBytes, pool, rem.size)
				stat(&a.stats.InactiveSplit, pool, 1)
			}
		}
	} else {
		if p.inPool {
			pool.blocks.delete(p.at)
		}
		if alreadySplit && b.expandable == nil {
			stat(&a.stats.InactiveSplitBytes, pool, -b.size)
			stat(&a.stats.InactiveSplit, pool, -1)
		}
	}
	b.allocated = true
	b.requested = orig
	b.frames = ctx
	if a.recordFast() { // record, spelled out: a call less
		a.ring.put(a.stampAt, b.ptr, orig, b.stream, ctx&a.stackMask, snapshot.ActionAlloc)
	} else if a.recording() {
		a.recordSlow(snapshot.ActionAlloc, b.ptr, orig, b.stream, ctx)
	}
	a.active.put(b.ptr, b)
	a.stats.allocated(pool.stat(), b.size, orig)
	if b.size >= a.cfg.MaxSplitSize {
		a.stats.OversizeAllocations.increase(1)
	}
	return b
}

// Free returns ptr to the cache. With streams recorded by RecordStream the
// block stays active_pending_free until events on them complete.
func (a *Allocator) Free(ptr uint64) error { return a.FreeWithStack(ptr, nil) }

// FreeWithStack is Free with the caller's stack (kept at RecordAll).
// Freeing address 0 does nothing.
func (a *Allocator) FreeWithStack(ptr uint64, frames []snapshot.Frame) error {
	if ptr == 0 {
		return nil
	}
	a.lock()
	if a.recording() {
		if a.counter {
			a.stampAt = cycleCounter() // stampCall's common case, spelled out: a call less
		} else {
			a.stampCall()
		}
	}
	defer a.mu.Unlock()
	b := a.active.get(ptr)
	if b == nil || !b.allocated {
		return fmt.Errorf("allocator: %w: %#x", ErrInvalidPointer, ptr)
	}
	ctx := a.intern(frames, RecordAll)
	b.allocated = false
	// A block no other stream uses is back in its pool at once: its
	// free_requested and free_completed entries are equal but for the
	// action, and one ring slot holds both (actionFreePair).
	now := len(b.streamUses) == 0
	act := snapshot.ActionFreeRequested
	if now {
		act = actionFreePair
	}
	if a.recordFast() { // record, spelled out: a call less
		a.ring.put(a.stampAt, b.ptr, b.requested, b.stream, ctx&a.stackMask, act)
	} else if a.recording() {
		a.recordSlow(act, b.ptr, b.requested, b.stream, ctx)
	}
	k := b.pool.stat()
	a.stats.Allocation.dec(k, 1)
	a.stats.AllocatedBytes.dec(k, b.size)
	if b.size >= a.cfg.MaxSplitSize {
		a.stats.OversizeAllocations.decrease(1)
	}
	if now {
		a.returnBlock(b)
	} else {
		a.insertEvents(b)
	}
	return a.takeFault()
}

func (a *Allocator) takeFault() error {
	err := a.fault
	a.fault = nil
	if err != nil {
		return fmt.Errorf("allocator: %w", err)
	}
	return nil
}

func (a *Allocator) setFault(err error) {
	if err != nil && a.fault == nil {
		a.fault = err
	}
}

// RecordStream marks ptr as used on s: its free then waits for the work
// queued on s at free time. The NPU flavour records even the allocation
// stream; the CUDA flavour ignores it.
func (a *Allocator) RecordStream(ptr uint64, s acl.Stream) error {
	if ptr == 0 {
		return nil
	}
	a.lock()
	defer a.mu.Unlock()
	b := a.active.get(ptr)
	if b == nil || !b.allocated {
		return fmt.Errorf("allocator: %w: %#x: no allocated block", ErrInvalidPointer, ptr)
	}
	if a.cfg.Flavour == config.FlavourCUDA && s == b.stream {
		return nil
	}
	if !slices.Contains(b.streamUses, s) {
		b.streamUses = append(b.streamUses, s)
	}
	return nil
}

// insertEvents is insert_events: one event per recorded stream.
func (a *Allocator) insertEvents(b *block) {
	streams := b.streamUses
	b.streamUses = nil
	slices.Sort(streams)
	for _, s := range streams {
		ev, err := a.getEvent()
		if err == nil {
			err = a.dev.RecordEvent(ev, s)
		}
		if err != nil {
			// The stream is gone (or no events left): nothing to wait for.
			a.setFault(err)
			continue
		}
		b.eventCount++
		a.events[s] = append(a.events[s], pendingEvent{ev, b})
		a.pendingEvents++
	}
	if b.eventCount == 0 {
		a.freeBlock(b, snapshot.NoStack)
	}
}

func (a *Allocator) getEvent() (acl.Event, error) {
	if n := len(a.freeEvents); n > 0 {
		ev := a.freeEvents[n-1]
		a.freeEvents = a.freeEvents[:n-1]
		return ev, nil
	}
	return a.dev.CreateEvent()
}

func (a *Allocator) sortedEventStreams() []acl.Stream {
	ss := make([]acl.Stream, 0, len(a.events))
	for s := range a.events {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	return ss
}

// processEvents is process_events: per stream, complete events in order up
// to the first that is not ready.
func (a *Allocator) processEvents(ctx snapshot.StackID) {
	if a.pendingEvents == 0 {
		return
	}
	for _, s := range a.sortedEventStreams() {
		q := a.events[s]
		n := 0
		for ; n < len(q); n++ {
			st, err := a.dev.QueryEvent(q[n].ev)
			if err != nil {
				a.setFault(err)
			} else if st != acl.EventComplete {
				break
			}
			a.completeEvent(q[n], ctx)
		}
		if n == len(q) {
			delete(a.events, s)
		} else {
			a.events[s] = q[n:]
		}
	}
}

func (a *Allocator) completeEvent(pe pendingEvent, ctx snapshot.StackID) {
	a.freeEvents = append(a.freeEvents, pe.ev)
	a.pendingEvents--
	pe.b.eventCount--
	if pe.b.eventCount == 0 {
		a.freeBlock(pe.b, ctx)
	}
}

// synchronizeAndFreeEvents waits for every pending event and frees the
// blocks.
func (a *Allocator) synchronizeAndFreeEvents(ctx snapshot.StackID) {
	a.stats.NumSyncAllStreams++
	for _, s := range a.sortedEventStreams() {
		for _, pe := range a.events[s] {
			a.setFault(a.dev.SynchronizeEvent(pe.ev))
			a.stampAt = 0 // the wait took time: read the clock again
			a.completeEvent(pe, ctx)
		}
		delete(a.events, s)
	}
}

// freeBlock is free_block: the block returns to its pool, merged with free
// neighbours.
func (a *Allocator) freeBlock(b *block, ctx snapshot.StackID) {
	a.record(snapshot.ActionFreeCompleted, b.ptr, b.requested, b.stream, ctx)
	a.returnBlock(b)
}

// returnBlock is freeBlock after its free_completed entry is recorded.
func (a *Allocator) returnBlock(b *block) {
	b.frames = snapshot.NoStack
	pool := b.pool
	origSize := b.size
	a.active.del(b.ptr)
	var netBlocks, netBytes int64
	// The merged block takes the place of the last neighbour it absorbed
	// (pool.blocks.update): a block split and merged back to its original
	// size goes back where it was, without moving a key.
	var at cursor
	held := false
	for _, c := range [2]*block{b.prev, b.next} {
		if !c.free() || b.mapped != c.mapped {
			continue
		}
		if held {
			pool.blocks.delete(at)
		}
		at, held = pool.blocks.find(c.key())
		netBlocks--
		netBytes -= a.absorb(b, c)
	}
	if held {
		pool.blocks.update(at, b.key())
	} else {
		pool.insert(b)
	}
	if b.isSplit() {
		netBlocks++
		netBytes += b.size
	}
	k := pool.stat()
	if b.expandable == nil {
		a.stats.InactiveSplit.add(k, netBlocks)
		a.stats.InactiveSplitBytes.add(k, netBytes)
	}
	a.stats.Active.dec(k, 1)
	a.stats.ActiveBytes.dec(k, origSize)
	a.stats.RequestedBytes.dec(k, b.requested)
}

// tryMerge is try_merge_blocks: dst absorbs a free neighbour src.
func (a *Allocator) tryMerge(dst, src *block) int64 {
	if !src.free() || dst.mapped != src.mapped {
		return 0
	}
	dst.pool.eraseAny(src)
	return a.absorb(dst, src)
}

// absorb links dst over its neighbour src, which has left its pool, and
// recycles src; it returns src's size.
func (a *Allocator) absorb(dst, src *block) int64 {
	if dst.prev == src {
		dst.ptr = src.ptr
		dst.prev = src.prev
		if dst.prev != nil {
			dst.prev.next = dst
		}
		dst.segFrames = src.segFrames
	} else {
		dst.next = src.next
		if dst.next != nil {
			dst.next.prev = dst
		}
	}
	n := src.size
	dst.size += n
	a.recycle(src)
	return n
}

// lock takes the allocator lock for one public call.
func (a *Allocator) lock() {
	a.mu.Lock()
	a.stampAt = 0
}

// stampCall reads the tick of a Malloc or Free that records entries, as it
// takes the lock: record, which would otherwise read it, then calls nothing
// on its fast path and keeps its arguments in registers. The call's entries
// share the tick either way. An injected clock is still read at the first
// entry: a simulation's clock may move between the two. a.mu held; callers
// check a.recording() first, which keeps this call off the history-off path,
// and Malloc and Free read the counter themselves (a call less).
func (a *Allocator) stampCall() {
	switch {
	case a.counter:
		a.stampAt = cycleCounter() // a direct call: no closure to load
	case !a.clk.exact:
		a.stampAt = a.now()
	}
}

// recording reports whether entries are recorded at all. a.mu held.
func (a *Allocator) recording() bool { return a.history || len(a.trackers) != 0 }

// stamp is the time of entries recorded now. Entries of one call share a
// single clock read (they are well under a microsecond apart) unless the
// call waited on the device in between.
func (a *Allocator) stamp() int64 {
	if a.stampAt == 0 {
		a.stampAt = a.now()
	}
	return a.stampAt
}

// syncDevice waits for the whole device (torch_npu's npuSynchronizeDevice).
func (a *Allocator) syncDevice() {
	_ = a.dev.SynchronizeDevice()
	a.stampAt = 0
}

// newBlock returns a free, unlinked block of pool at [ptr, ptr+size),
// reusing a recycled one: the hot path then allocates nothing, so
// steady-state allocation triggers no garbage collection. Fields are set
// one by one: assigning a block literal goes through a stack copy whose
// wide moves stall on store forwarding.
func (a *Allocator) newBlock(ptr uint64, size int64, stream acl.Stream, pool *blockPool, mapped bool, es *expandableSegment) *block {
	var b *block
	if n := len(a.spare); n > 0 {
		b = a.spare[n-1]
		a.spare = a.spare[:n-1]
	} else {
		b = new(block)
		a.tab.add(b)
	}
	b.ptr, b.size, b.stream, b.pool, b.mapped, b.expandable = ptr, size, stream, pool, mapped, es
	return b
}

// recycle keeps a block that left every pool and chain for newBlock.
func (a *Allocator) recycle(b *block) {
	*b = block{id: b.id}
	if len(a.spare) < maxSpareBlocks {
		a.spare = append(a.spare, b)
	} else {
		a.tab.drop(b.id)
	}
}

const maxSpareBlocks = 4096
