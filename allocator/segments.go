package allocator

import (
	"fmt"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

// allocBlock is alloc_block: a new device segment (or expandable mapping)
// for p, under the fraction limit.
func (a *Allocator) allocBlock(p *allocParams, isRetry bool, ctx snapshot.StackID) bool {
	size := p.allocSize
	if isRetry {
		a.stats.NumAllocRetries++
	}
	if a.fractionSet && a.totalAllocated+size > a.allowedMax {
		p.err = acl.ErrMemoryAllocation
		return false
	}
	if a.cfg.Flavour == config.FlavourNPU && a.cfg.ThrowOnMallocOOM &&
		float64(a.totalAllocated+size) > a.cfg.MemoryFraction*float64(a.deviceTotal) {
		a.stats.NumOOMRejections++
		p.rejected = true
		p.err = acl.ErrMemoryAllocation
		a.warnOnce(fmt.Sprintf("Preemptively rejecting allocation of %s: it would exceed per_process_memory_fraction", bytesize.Torch(size)))
		return false
	}
	if a.cfg.ExpandableSegments {
		p.block = a.tryAllocateExpandable(p, ctx)
		if p.block == nil {
			if p.err == nil {
				p.err = acl.ErrMemoryAllocation
			}
			return false
		}
		return true
	}
	policy := acl.HugeFirst
	if a.cfg.PageSize1G && !p.pool.small {
		policy = acl.Huge1GOnly
	}
	ptr, err := a.dev.MallocAlign32(size, policy)
	if err != nil && policy == acl.Huge1GOnly {
		a.warnOnce("HUGE1G_ONLY allocation failed, falling back to HUGE_FIRST")
		ptr, err = a.dev.MallocAlign32(size, acl.HugeFirst)
	}
	if err != nil {
		p.err = err
		return false
	}
	a.totalAllocated += size
	b := a.newBlock(ptr, size, p.stream, p.pool, true, nil)
	b.segFrames = ctx
	stat(&a.stats.Segment, p.pool, 1)
	stat(&a.stats.ReservedBytes, p.pool, size)
	if size >= a.cfg.MaxSplitSize {
		a.stats.OversizeSegments.increase(1)
	}
	a.stats.NumDeviceAlloc++
	a.record(snapshot.ActionSegmentAlloc, ptr, size, p.stream, ctx)
	p.block = b
	return true
}

// releaseBlock is release_block: an unsplit cached segment goes back to the
// device.
func (a *Allocator) releaseBlock(b *block, ctx snapshot.StackID) {
	a.setFault(a.dev.Free(b.ptr))
	a.totalAllocated -= b.size
	stat(&a.stats.Segment, b.pool, -1)
	stat(&a.stats.ReservedBytes, b.pool, -b.size)
	if b.size >= a.cfg.MaxSplitSize {
		a.stats.OversizeSegments.decrease(1)
	}
	a.stats.NumDeviceFree++
	a.record(snapshot.ActionSegmentFree, b.ptr, b.size, b.stream, ctx)
	b.pool.erase(b)
	a.recycle(b)
}

// releaseAvailableCached is release_available_cached_blocks: free oversize
// cached segments of the request's pool and stream, the smallest one that
// covers max(request, max_split_size), else the largest ones downward.
func (a *Allocator) releaseAvailableCached(p *allocParams, ctx snapshot.StackID) bool {
	maxSplit := a.cfg.MaxSplitSize
	if maxSplit == config.Unlimited {
		return false
	}
	if a.cfg.Flavour == config.FlavourNPU {
		a.syncDevice()
	}
	pool := p.pool
	set := &pool.blocks
	key := max(p.size, maxSplit)
	at := set.seek(poolKey{stream: p.stream, size: key})
	if set.valid(at) && set.key(at).stream == p.stream && pool.at(at).expandable == nil {
		if b := pool.at(at); !b.isSplit() {
			a.releaseBlock(b, ctx)
			return true
		}
		return false
	}
	if set.valid(at) {
		at = set.prev(at)
	} else {
		at = set.last()
	}
	if at.c < 0 {
		return false
	}
	var released int64
	var victims []*block
	for released < key {
		b := pool.at(at)
		if b.size < maxSplit || b.stream != p.stream {
			break
		}
		if b.expandable == nil && !b.isSplit() {
			victims = append(victims, b)
			released += b.size
		}
		if at = set.prev(at); at.c < 0 {
			break
		}
	}
	for _, b := range victims {
		a.releaseBlock(b, ctx)
	}
	return released >= key
}

// releaseCachedBlocks is release_cached_blocks: wait for pending frees,
// then give every unsplit cached segment and free expandable page back.
func (a *Allocator) releaseCachedBlocks(ctx snapshot.StackID) bool {
	a.synchronizeAndFreeEvents(ctx)
	a.releaseBlocks(&a.large, ctx)
	a.releaseBlocks(&a.small, ctx)
	return true
}

func (a *Allocator) releaseBlocks(pool *blockPool, ctx snapshot.StackID) {
	var release, unmap []*block
	for b := range pool.freeBlocks() {
		switch {
		case b.expandable != nil:
			unmap = append(unmap, b)
		case !b.isSplit():
			release = append(release, b)
		}
	}
	for _, b := range release {
		a.releaseBlock(b, ctx)
	}
	for _, b := range unmap {
		a.unmapBlock(b, ctx)
	}
}

// garbageCollect is garbage_collect_cached_blocks: release unsplit large
// cached segments older than the average until reserved memory is back
// under the threshold.
func (a *Allocator) garbageCollect(ctx snapshot.StackID) {
	threshold := int64(a.cfg.GCThreshold * float64(a.allowedMax))
	if a.totalAllocated <= threshold {
		return
	}
	target := a.totalAllocated - threshold
	var totalAge int64
	var n int64
	for b := range a.large.freeBlocks() {
		if !b.isSplit() {
			totalAge += b.gcCount
			n++
		}
	}
	if n == 0 {
		return
	}
	if a.cfg.Flavour == config.FlavourNPU {
		a.syncDevice()
	}
	var reclaimed int64
	freed := true
	for reclaimed < target && freed && n > 0 {
		ageThreshold := float64(totalAge) / float64(n)
		freed = false
		var victims []*block
		for b := range a.large.freeBlocks() {
			if !b.isSplit() && b.expandable == nil && float64(b.gcCount) >= ageThreshold {
				victims = append(victims, b)
			}
		}
		for _, b := range victims {
			freed = true
			reclaimed += b.size
			totalAge -= b.gcCount
			n--
			a.releaseBlock(b, ctx)
		}
	}
}

// EmptyCache releases every cached segment and free expandable page,
// waiting for pending stream-deferred frees first.
func (a *Allocator) EmptyCache() error {
	a.lock()
	defer a.mu.Unlock()
	a.releaseCachedBlocks(snapshot.NoStack)
	return a.takeFault()
}

// SetMemoryFraction limits reserved memory to f × device total. The NPU
// flavour accepts [0, 1] and treats 1 as no limit (GC off); the CUDA flavour
// sets a limit for any value.
func (a *Allocator) SetMemoryFraction(f float64) error {
	if f < 0 || f > 1 || f != f {
		return config.Errorf("invalid fraction:%g. Please set within [0, 1].", f)
	}
	a.lock()
	defer a.mu.Unlock()
	a.setFraction(f)
	return nil
}

func (a *Allocator) setFraction(f float64) {
	a.allowedMax = int64(f * float64(a.deviceTotal))
	a.fractionSet = a.cfg.Flavour == config.FlavourCUDA || f < 1
}

// SetAllocatorSettings changes settings at run time the way
// torch_npu.npu.memory._set_allocator_settings does: only expandable_segments,
// max_split_size_mb, max_non_split_rounding_mb, release_lock_on_npumalloc,
// throw_on_npumalloc_oom, per_process_memory_fraction and the pinned_* sizes
// are accepted (the CUDA flavour accepts every key). Segments already
// cached keep their kind; stats' max_split_size keeps its construction
// value, as in torch.
func (a *Allocator) SetAllocatorSettings(conf string) error {
	a.lock()
	defer a.mu.Unlock()
	c, err := a.cfg.Update(conf)
	if err != nil {
		return err
	}
	if c.MemoryFraction != a.cfg.MemoryFraction && c.Flavour == config.FlavourNPU {
		a.setFraction(c.MemoryFraction)
	}
	a.cfg = c
	return nil
}

// expandableSegment is a reserved VA range mapped page by page
// (docs/reference/allocator-semantics.md §3).
type expandableSegment struct {
	va       uint64
	pageSize int64
	handles  []acl.PhysHandle // per page; 0 = unmapped
	stream   acl.Stream
}

// findExpandableBlock is find_expandable_block: the lowest same-stream run
// of free and unmapped blocks that can hold size, else a new segment.
func (a *Allocator) findExpandableBlock(p *allocParams) (*block, error) {
	pool := p.pool
	size := p.size
	roomFrom := func(b *block) bool {
		var n int64
		for n < size && b.free() {
			n += b.size
			b = b.next
		}
		return n >= size
	}
	set := &pool.unmapped
	for at := set.seek(poolKey{stream: p.stream}); set.valid(at) && set.key(at).stream == p.stream; at = set.next(at) {
		c := pool.unmappedAt(at)
		if c.prev.free() {
			c = c.prev
		}
		if roomFrom(c) {
			return c, nil
		}
	}
	page := a.cfg.ExpandablePageSize(pool.small)
	vaSize := config.RoundUp(a.deviceTotal+a.deviceTotal/8, page)
	va, err := a.dev.ReserveMemAddress(vaSize, 0, 0, 1)
	if err != nil {
		return nil, err
	}
	es := &expandableSegment{va: va, pageSize: page, handles: make([]acl.PhysHandle, vaSize/page), stream: p.stream}
	a.expandables = append(a.expandables, es)
	c := a.newBlock(va, vaSize, p.stream, pool, false, es)
	pool.insertUnmapped(c)
	return c, nil
}

// mapPages backs [ptr, ptr+size) rounded out to pages with fresh physical
// memory; it returns the mapped range, size 0 when memory ran out.
func (a *Allocator) mapPages(es *expandableSegment, ptr uint64, size int64) (uint64, int64, error) {
	begin := int64(ptr-es.va) / es.pageSize
	end := (int64(ptr-es.va) + size + es.pageSize - 1) / es.pageSize
	for i := begin; i < end; i++ {
		h, err := a.dev.MallocPhysical(es.pageSize)
		if err == nil {
			if err = a.dev.MapMem(es.va+uint64(i*es.pageSize), es.pageSize, 0, h); err != nil {
				_ = a.dev.FreePhysical(h)
			}
		}
		if err != nil {
			for j := begin; j < i; j++ {
				_ = a.dev.UnmapMem(es.va + uint64(j*es.pageSize))
				_ = a.dev.FreePhysical(es.handles[j])
				es.handles[j] = 0
			}
			return ptr, 0, err
		}
		es.handles[i] = h
	}
	return es.va + uint64(begin*es.pageSize), (end - begin) * es.pageSize, nil
}

// unmapPages releases the whole pages inside [ptr, ptr+size).
func (a *Allocator) unmapPages(es *expandableSegment, ptr uint64, size int64) (uint64, int64) {
	begin := (int64(ptr-es.va) + es.pageSize - 1) / es.pageSize
	end := (int64(ptr-es.va) + size) / es.pageSize
	if begin >= end {
		return ptr, 0
	}
	if a.cfg.Flavour == config.FlavourNPU {
		a.syncDevice()
	}
	for i := begin; i < end; i++ {
		a.setFault(a.dev.UnmapMem(es.va + uint64(i*es.pageSize)))
		a.setFault(a.dev.FreePhysical(es.handles[i]))
		es.handles[i] = 0
	}
	return es.va + uint64(begin*es.pageSize), (end - begin) * es.pageSize
}

// mapBlock is map_block: map the first size bytes of an unmapped block.
func (a *Allocator) mapBlock(b *block, size int64, ctx snapshot.StackID) (bool, error) {
	ptr, n, err := a.mapPages(b.expandable, b.ptr, size)
	if n == 0 {
		return false, err
	}
	pool := b.pool
	pool.eraseUnmapped(b)
	b.mapped = true
	if n < b.size {
		rest := a.newBlock(ptr+uint64(n), b.size-n, b.stream, pool, false, b.expandable)
		rest.linkAfter(b)
		pool.insertUnmapped(rest)
		b.size = n
	}
	a.tryMerge(b, b.prev)
	a.tryMerge(b, b.next)
	pool.insert(b)
	a.totalAllocated += n
	stat(&a.stats.ReservedBytes, pool, n)
	a.stats.NumDeviceAlloc++
	a.record(snapshot.ActionSegmentMap, ptr, n, b.stream, ctx)
	if b.prev == nil && b.segFrames == snapshot.NoStack {
		b.segFrames = ctx
	}
	return true, nil
}

// tryAllocateExpandable is try_allocate_expandable_block.
func (a *Allocator) tryAllocateExpandable(p *allocParams, ctx snapshot.StackID) *block {
	c, err := a.findExpandableBlock(p)
	if err != nil {
		p.err = err
		return nil
	}
	size := p.size
	if !c.mapped {
		ok, err := a.mapBlock(c, min(c.size, size), ctx)
		if !ok {
			p.err = err
			return nil
		}
	}
	for c.size < size {
		next := c.next
		ok, err := a.mapBlock(next, min(size-c.size, next.size), ctx)
		if !ok {
			p.err = err
			return nil
		}
		c = next
	}
	c.pool.erase(c)
	return c
}

// unmapBlock is unmap_block: unmap the whole free pages of a cached
// expandable block, keeping the slivers before and after as free blocks.
func (a *Allocator) unmapBlock(b *block, ctx snapshot.StackID) {
	ptr, n := a.unmapPages(b.expandable, b.ptr, b.size)
	if n == 0 {
		return
	}
	pool := b.pool
	pool.erase(b)
	before := int64(ptr - b.ptr)
	if before > 0 {
		f := a.newBlock(b.ptr, before, b.stream, pool, true, b.expandable)
		f.linkBefore(b)
		pool.insert(f)
	}
	if after := b.size - before - n; after > 0 {
		f := a.newBlock(ptr+uint64(n), after, b.stream, pool, true, b.expandable)
		f.linkAfter(b)
		pool.insert(f)
	}
	b.ptr, b.size, b.mapped = ptr, n, false
	a.tryMerge(b, b.prev)
	a.tryMerge(b, b.next)
	pool.insertUnmapped(b)
	a.totalAllocated -= n
	stat(&a.stats.ReservedBytes, pool, -n)
	a.stats.NumDeviceFree++
	if ctx == snapshot.NoStack {
		ctx = b.segFrames
	}
	a.record(snapshot.ActionSegmentUnmap, ptr, n, b.stream, ctx)
}
