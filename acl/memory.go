package acl

import "fmt"

// Placement constants of aclrtMalloc.
const (
	mallocAlign    = 64      // start alignment of normal-page allocations
	mallocRound    = 32      // sizes round up to 32 B
	mallocPad      = 32      // aclrtMalloc adds 32 B after rounding
	hugeThreshold  = 1 << 20 // HugeFirst uses huge pages above 1 MiB
	huge1GPageSize = 1 << 30
	maxAllocSize   = int64(1) << 60 // larger requests cannot be rounded safely
)

// allocation is one live Malloc/MallocAlign32 result.
type allocation struct {
	footprint int64 // bytes taken from HBM
	requested int64
	page      pageKind
}

type pageKind int

const (
	pageNormal pageKind = iota
	pageHuge
	pageHuge1G
)

func (k pageKind) String() string {
	switch k {
	case pageHuge:
		return "huge (2 MiB)"
	case pageHuge1G:
		return "huge (1 GiB)"
	}
	return "normal"
}

// Malloc allocates size bytes of HBM (aclrtMalloc). The size is rounded up to
// 32 B and padded by 32 B, then placed by policy as described in the package
// doc. It fails with ErrParamInvalid for size ≤ 0 or an unknown policy and
// with ErrMemoryAllocation when no free range fits or the HBM cap is reached.
func (d *Device) Malloc(size int64, policy MallocPolicy) (uint64, error) {
	return d.malloc("aclrtMalloc", size, policy, true)
}

// MallocAlign32 is aclrtMallocAlign32: like Malloc but without the 32-B pad.
// torch_npu's caching allocator allocates its segments with it, so a 2 MiB
// segment occupies exactly one huge page.
func (d *Device) MallocAlign32(size int64, policy MallocPolicy) (uint64, error) {
	return d.malloc("aclrtMallocAlign32", size, policy, false)
}

func (d *Device) malloc(api string, size int64, policy MallocPolicy, pad bool) (uint64, error) {
	if size <= 0 || size >= maxAllocSize {
		return 0, newErr(CodeRTParamInvalid, api, "invalid size %d", size)
	}
	base := policy &^ (MemTypeLowBandWidth | MemTypeHighBandWidth | MemAccessUserSpaceReadonly)
	if base < HugeFirst || base > Huge1GOnlyP2P {
		return 0, newErr(CodeRTParamInvalid, api, "invalid malloc policy %#x", int(policy))
	}
	if base >= HugeFirstP2P && base <= NormalOnlyP2P {
		base -= HugeFirstP2P // P2P variants place like their plain forms
	}

	rounded := alignUp(uint64(size), mallocRound)
	normal := rounded
	if pad {
		normal += mallocPad
	}
	type try struct {
		size, align uint64
		page        pageKind
	}
	hugeTry := try{alignUp(normal, uint64(Granularity)), uint64(Granularity), pageHuge}
	normalTry := try{normal, mallocAlign, pageNormal}
	var tries []try
	switch base {
	case HugeFirst:
		if rounded > hugeThreshold {
			tries = []try{hugeTry, normalTry}
		} else {
			tries = []try{normalTry}
		}
	case HugeOnly:
		tries = []try{hugeTry}
	case NormalOnly:
		tries = []try{normalTry}
	default: // Huge1GOnly, Huge1GOnlyP2P: rounding only, no pad
		tries = []try{{alignUp(rounded, huge1GPageSize), huge1GPageSize, pageHuge1G}}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.injectFault() {
		return 0, newErr(CodeRTMemoryAllocation, api, "injected failure (FailNthMalloc) for %d bytes", size)
	}
	total := d.total()
	for _, t := range tries {
		if d.used+int64(t.size) > total {
			continue
		}
		addr, ok := d.hbm.find(t.size, t.align)
		if !ok {
			continue
		}
		d.hbm.take(addr, t.size)
		d.used += int64(t.size)
		d.allocs[addr] = allocation{footprint: int64(t.size), requested: size, page: t.page}
		return addr, nil
	}
	last := tries[len(tries)-1]
	return 0, newErr(CodeRTMemoryAllocation, api, "cannot place %d bytes (%d with %s pages): %s",
		size, tries[0].size, tries[0].page, d.shortage(int64(last.size)))
}

// shortage explains a failed placement: out of capacity or fragmented.
func (d *Device) shortage(need int64) string {
	free := max(d.total()-d.used, 0)
	if need > free {
		return fmt.Sprintf("%d bytes free of %d", free, d.total())
	}
	return fmt.Sprintf("%d bytes free of %d but the largest free range is %d (fragmented)", free, d.total(), d.hbm.largest())
}

// Free releases an allocation made by Malloc or MallocAlign32 (aclrtFree).
// An unknown pointer, including a second free of the same pointer, fails
// with ErrParamInvalid and changes nothing.
func (d *Device) Free(ptr uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.allocs[ptr]
	if !ok {
		return newErr(CodeRTParamInvalid, "aclrtFree", "pointer %#x is not a live allocation", ptr)
	}
	delete(d.allocs, ptr)
	d.hbm.release(ptr, uint64(a.footprint))
	d.used -= a.footprint
	return nil
}

// AllocationSize returns the HBM footprint of a live allocation (after
// rounding, padding and page rounding), or false when ptr is not one.
func (d *Device) AllocationSize(ptr uint64) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.allocs[ptr]
	return a.footprint, ok
}

// FailNthMalloc makes the n-th next Malloc, MallocAlign32 or MallocPhysical
// call (that passes argument checks) fail with ErrMemoryAllocation; n ≤ 0
// disables a pending injection.
func (d *Device) FailNthMalloc(n int) {
	d.mu.Lock()
	d.failNth = max(n, 0)
	d.mu.Unlock()
}

// injectFault counts one allocation call against FailNthMalloc; d.mu held.
func (d *Device) injectFault() bool {
	if d.failNth == 0 {
		return false
	}
	d.failNth--
	return d.failNth == 0
}

// SetHBMLimit caps the usable HBM at bytes (bytes ≤ 0 removes the cap).
// GetMemInfo then reports the cap as total. Allocations already above the
// cap stay; new ones fail until usage drops below it.
func (d *Device) SetHBMLimit(bytes int64) {
	d.mu.Lock()
	d.limit = max(bytes, 0)
	d.mu.Unlock()
}
