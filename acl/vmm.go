package acl

import (
	"slices"
	"sort"
)

// PhysHandle is an aclrtDrvMemHandle: physical HBM from MallocPhysical.
type PhysHandle uint64

// reservation is one ReserveMemAddress range and the mappings inside it,
// sorted by address.
type reservation struct {
	start, size uint64
	maps        []mapping
}

type mapping struct {
	va, size uint64
	h        PhysHandle
}

// physical is a MallocPhysical handle: whole 2 MiB pages of HBM, not
// necessarily contiguous.
type physical struct {
	size   int64
	pages  []span
	mapped int // live mappings of the handle
}

// reserveAlign is where ReserveMemAddress may place an explicit expectPtr.
const reserveAlign = uint64(GiB)

// MemGetAllocationGranularity returns the VMM page size, 2 MiB
// (aclrtMemGetAllocationGranularity).
func (d *Device) MemGetAllocationGranularity() int64 { return Granularity }

// ReserveMemAddress reserves size bytes of device address space without
// backing memory (aclrtReserveMemAddress). size must be a non-zero multiple
// of the granularity and alignment must be 0 (ErrParamInvalid otherwise);
// flags is 0 (normal pages) or 1 (huge pages). A non-zero expect asks for
// that address: it must be 1 GiB aligned (ErrParamInvalid) and free
// (ErrMemoryAllocation). Otherwise the lowest free 2 MiB-aligned range is
// used.
func (d *Device) ReserveMemAddress(size int64, alignment int64, expect uint64, flags uint64) (uint64, error) {
	const api = "aclrtReserveMemAddress"
	switch {
	case size <= 0 || size%Granularity != 0:
		return 0, newErr(CodeRTParamInvalid, api, "size %d is not a non-zero multiple of the %d-byte granularity", size, Granularity)
	case alignment != 0:
		return 0, newErr(CodeRTParamInvalid, api, "alignment must be 0, got %d", alignment)
	case flags > 1:
		return 0, newErr(CodeRTParamInvalid, api, "flags must be 0 or 1, got %d", flags)
	case expect != 0 && expect%reserveAlign != 0:
		return 0, newErr(CodeRTParamInvalid, api, "expected address %#x is not 1 GiB aligned", expect)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := uint64(size)
	var va uint64
	if expect != 0 {
		if !d.va.isFree(expect, n) {
			return 0, newErr(CodeRTMemoryAllocation, api, "range [%#x, %#x) is not free", expect, expect+n)
		}
		va = expect
	} else {
		var ok bool
		if va, ok = d.va.find(n, uint64(Granularity)); !ok {
			return 0, newErr(CodeRTMemoryAllocation, api, "no free address range of %d bytes", size)
		}
	}
	d.va.take(va, n)
	d.reserves[va] = &reservation{start: va, size: n}
	return va, nil
}

// ReleaseMemAddress releases a reservation (aclrtReleaseMemAddress). va must
// be the start of a reservation with no mappings left (ErrParamInvalid).
func (d *Device) ReleaseMemAddress(va uint64) error {
	const api = "aclrtReleaseMemAddress"
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.reserves[va]
	if !ok {
		return newErr(CodeRTParamInvalid, api, "%#x is not a reserved address", va)
	}
	if len(r.maps) > 0 {
		return newErr(CodeRTParamInvalid, api, "reservation %#x still has %d mapping(s)", va, len(r.maps))
	}
	delete(d.reserves, va)
	d.va.release(va, r.size)
	return nil
}

// MallocPhysical allocates size bytes of physical HBM in 2 MiB pages
// (aclrtMallocPhysical). size must be a non-zero multiple of the granularity
// (ErrParamInvalid). The pages come from the same free-space map as Malloc,
// lowest first, and need not be contiguous; the call fails with
// ErrMemoryAllocation when not enough pages are free or the cap is reached.
func (d *Device) MallocPhysical(size int64) (PhysHandle, error) {
	const api = "aclrtMallocPhysical"
	if size <= 0 || size%Granularity != 0 {
		return 0, newErr(CodeRTParamInvalid, api, "size %d is not a non-zero multiple of the %d-byte granularity", size, Granularity)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.injectFault() {
		return 0, newErr(CodeRTMemoryAllocation, api, "injected failure (FailNthMalloc) for %d bytes", size)
	}
	if d.used+size > d.total() {
		return 0, newErr(CodeRTMemoryAllocation, api, "cannot allocate %d bytes: %s", size, d.shortage(size))
	}
	g := uint64(Granularity)
	need := uint64(size)
	var pages []span
	for _, r := range d.hbm.free {
		a := alignUp(r.start, g)
		if a >= r.end {
			continue
		}
		n := min((r.end-a)/g*g, need)
		if n > 0 {
			pages = append(pages, span{a, a + n})
			need -= n
		}
		if need == 0 {
			break
		}
	}
	if need > 0 {
		return 0, newErr(CodeRTMemoryAllocation, api, "cannot allocate %d bytes: only %d bytes of free 2 MiB pages", size, size-int64(need))
	}
	for _, p := range pages {
		d.hbm.take(p.start, p.end-p.start)
	}
	d.used += size
	d.nextHandle += 0x40
	h := PhysHandle(d.nextHandle)
	d.phys[h] = &physical{size: size, pages: pages}
	return h, nil
}

// FreePhysical returns a handle's pages to HBM (aclrtFreePhysical). An
// unknown handle fails with ErrInvalidHandle, a handle that is still mapped
// with ErrParamInvalid.
func (d *Device) FreePhysical(h PhysHandle) error {
	const api = "aclrtFreePhysical"
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.phys[h]
	if !ok {
		return newErr(CodeRTInvalidHandle, api, "unknown physical memory handle %#x", uint64(h))
	}
	if p.mapped > 0 {
		return newErr(CodeRTParamInvalid, api, "handle %#x is still mapped %d time(s)", uint64(h), p.mapped)
	}
	delete(d.phys, h)
	for _, pg := range p.pages {
		d.hbm.release(pg.start, pg.end-pg.start)
	}
	d.used -= p.size
	return nil
}

// MapMem maps size bytes of handle h, starting offset bytes into it, at va
// (aclrtMapMem). va must be granularity aligned (ErrAddrUnaligned); size and
// offset must be multiples of the granularity, size non-zero, the range must
// lie inside one reservation and inside the handle, and must not overlap an
// existing mapping (ErrParamInvalid). An unknown handle is ErrInvalidHandle.
func (d *Device) MapMem(va uint64, size int64, offset int64, h PhysHandle) error {
	const api = "aclrtMapMem"
	switch {
	case va%uint64(Granularity) != 0:
		return newErr(CodeRTAddrUnaligned, api, "address %#x is not %d-byte aligned", va, Granularity)
	case size <= 0 || size%Granularity != 0:
		return newErr(CodeRTParamInvalid, api, "size %d is not a non-zero multiple of the %d-byte granularity", size, Granularity)
	case offset < 0 || offset%Granularity != 0:
		return newErr(CodeRTParamInvalid, api, "offset %d is not a multiple of the %d-byte granularity", offset, Granularity)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.phys[h]
	if !ok {
		return newErr(CodeRTInvalidHandle, api, "unknown physical memory handle %#x", uint64(h))
	}
	if offset+size > p.size {
		return newErr(CodeRTParamInvalid, api, "offset %d + size %d exceeds the handle's %d bytes", offset, size, p.size)
	}
	r := d.reservationOf(va)
	n := uint64(size)
	if r == nil || va+n > r.start+r.size {
		return newErr(CodeRTParamInvalid, api, "range [%#x, %#x) is not inside one reservation", va, va+n)
	}
	i := sort.Search(len(r.maps), func(i int) bool { return r.maps[i].va >= va })
	if (i < len(r.maps) && r.maps[i].va < va+n) || (i > 0 && r.maps[i-1].va+r.maps[i-1].size > va) {
		return newErr(CodeRTParamInvalid, api, "range [%#x, %#x) is already mapped", va, va+n)
	}
	r.maps = slices.Insert(r.maps, i, mapping{va: va, size: n, h: h})
	p.mapped++
	return nil
}

// UnmapMem removes the mapping that starts at va (aclrtUnmapMem);
// ErrParamInvalid when no mapping starts there.
func (d *Device) UnmapMem(va uint64) error {
	const api = "aclrtUnmapMem"
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.reservationOf(va)
	if r != nil {
		i := sort.Search(len(r.maps), func(i int) bool { return r.maps[i].va >= va })
		if i < len(r.maps) && r.maps[i].va == va {
			d.phys[r.maps[i].h].mapped--
			r.maps = slices.Delete(r.maps, i, i+1)
			return nil
		}
	}
	return newErr(CodeRTParamInvalid, api, "no mapping starts at %#x", va)
}

// reservationOf returns the reservation containing va, or nil; d.mu held.
// Reservations are few (one per expandable segment), so a scan is enough.
func (d *Device) reservationOf(va uint64) *reservation {
	for _, r := range d.reserves {
		if va >= r.start && va < r.start+r.size {
			return r
		}
	}
	return nil
}
