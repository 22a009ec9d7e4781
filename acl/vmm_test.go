package acl

import "testing"

func mustReserve(t *testing.T, d *Device, size int64) uint64 {
	t.Helper()
	va, err := d.ReserveMemAddress(size, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return va
}

func mustPhys(t *testing.T, d *Device, size int64) PhysHandle {
	t.Helper()
	h, err := d.MallocPhysical(size)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestGranularity(t *testing.T) {
	d := smallDevice(t, 8)
	if g := d.MemGetAllocationGranularity(); g != 2*MiB {
		t.Fatalf("granularity %d", g)
	}
}

func TestReserveMemAddress(t *testing.T) {
	d := smallDevice(t, 8)
	a := mustReserve(t, d, 10*MiB)
	b := mustReserve(t, d, 2*MiB)
	if a != VABase || b != VABase+uint64(10*MiB) {
		t.Fatalf("reservations at %#x %#x", a, b)
	}
	// Reserving address space takes no HBM.
	if free, _ := memInfo(t, d); free != 8*MiB {
		t.Fatalf("reservation took HBM: free %d", free)
	}
	want := VABase + uint64(4*GiB)
	c, err := d.ReserveMemAddress(GiB, 0, want, 0)
	if err != nil || c != want {
		t.Fatalf("expect %#x: %#x, %v", want, c, err)
	}
	_, err = d.ReserveMemAddress(2*MiB, 0, want, 0) // occupied
	wantCode(t, err, ErrMemoryAllocation)
	_, err = d.ReserveMemAddress(2*MiB, 0, VABase, 0) // overlaps a
	wantCode(t, err, ErrMemoryAllocation)
	_, err = d.ReserveMemAddress(4*GiB, 0, 0, 0) // too big for the hole below c: placed above it
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		size, align int64
		expect      uint64
		flags       uint64
	}{
		{0, 0, 0, 0}, {-2 * MiB, 0, 0, 0}, {MiB, 0, 0, 0}, {3 * MiB, 0, 0, 0}, // size
		{2 * MiB, 2 * MiB, 0, 0},                // alignment must be 0
		{2 * MiB, 0, 0, 2},                      // flags 0 or 1
		{2 * MiB, 0, VABase + uint64(2*MiB), 0}, // expect must be 1 GiB aligned
	} {
		_, err := d.ReserveMemAddress(bad.size, bad.align, bad.expect, bad.flags)
		wantCode(t, err, ErrParamInvalid)
	}
	_, err = d.ReserveMemAddress(4<<40, 0, 0, 0) // more address space than exists
	wantCode(t, err, ErrMemoryAllocation)

	// Release returns the range; the lowest fit is reused.
	must(t, d.ReleaseMemAddress(a))
	if again := mustReserve(t, d, 2*MiB); again != a {
		t.Fatalf("released range not reused: %#x", again)
	}
	wantCode(t, d.ReleaseMemAddress(a+uint64(2*MiB)), ErrParamInvalid) // not a start
	wantCode(t, d.ReleaseMemAddress(0x1234), ErrParamInvalid)
	must(t, d.ReleaseMemAddress(b))
	wantCode(t, d.ReleaseMemAddress(b), ErrParamInvalid) // twice
}

func TestMallocPhysicalCountsAgainstHBM(t *testing.T) {
	d := smallDevice(t, 8)
	h := mustPhys(t, d, 4*MiB)
	if free, _ := memInfo(t, d); free != 4*MiB || d.Info().HBMUsed != 4*MiB {
		t.Fatalf("after MallocPhysical: free %d used %d", free, d.Info().HBMUsed)
	}
	// Physical pages and Malloc share HBM.
	_, err := d.MallocAlign32(6*MiB, NormalOnly)
	wantCode(t, err, ErrMemoryAllocation)
	_, err = d.MallocPhysical(6 * MiB)
	wantCode(t, err, ErrMemoryAllocation)
	for _, bad := range []int64{0, -2 * MiB, MiB, 3 * MiB} {
		_, err := d.MallocPhysical(bad)
		wantCode(t, err, ErrParamInvalid)
	}
	must(t, d.FreePhysical(h))
	if free, _ := memInfo(t, d); free != 8*MiB || d.LargestFreeRange() != 8*MiB {
		t.Fatalf("after FreePhysical: free %d largest %d", free, d.LargestFreeRange())
	}
	wantCode(t, d.FreePhysical(h), ErrInvalidHandle) // double free
	wantCode(t, d.FreePhysical(0), ErrInvalidHandle)
}

// TestMallocPhysicalUsesScatteredPages: physical memory is page-granular, so
// it fits in holes that a contiguous Malloc of the same size cannot use —
// the point of expandable segments.
func TestMallocPhysicalUsesScatteredPages(t *testing.T) {
	d := smallDevice(t, 8)
	var p [4]uint64
	for i := range p {
		p[i], _ = d.MallocAlign32(2*MiB, NormalOnly)
	}
	must(t, d.Free(p[0]))
	must(t, d.Free(p[2]))
	_, err := d.MallocAlign32(4*MiB, NormalOnly)
	wantCode(t, err, ErrMemoryAllocation)
	h := mustPhys(t, d, 4*MiB)
	if free, _ := memInfo(t, d); free != 0 {
		t.Fatalf("free %d after taking both holes", free)
	}
	must(t, d.FreePhysical(h))
	if free, _ := memInfo(t, d); free != 4*MiB || d.LargestFreeRange() != 2*MiB {
		t.Fatalf("pages not returned: free %d largest %d", free, d.LargestFreeRange())
	}
	// Normal-page slivers are not whole 2 MiB pages.
	must(t, d.Free(p[1]))
	must(t, d.Free(p[3]))
	mustMalloc(t, d, 1, NormalOnly) // [0, 64) breaks the first page
	q, _ := d.MallocAlign32(2*MiB, NormalOnly)
	must(t, d.Free(q))    // q sat at 64: free is now [64, 8 MiB)
	mustPhys(t, d, 6*MiB) // pages 1..3
	if free, _ := memInfo(t, d); free != 2*MiB-64 {
		t.Fatalf("free %d, want 2 MiB - 64", free)
	}
	_, err = d.MallocPhysical(2 * MiB) // 2 MiB - 64 free in page 0: not a whole page
	wantCode(t, err, ErrMemoryAllocation)
}

func TestMapUnmap(t *testing.T) {
	d := smallDevice(t, 64)
	va := mustReserve(t, d, 8*MiB)
	h1 := mustPhys(t, d, 2*MiB)
	h2 := mustPhys(t, d, 4*MiB)
	g := uint64(2 * MiB)
	must(t, d.MapMem(va, 2*MiB, 0, h1))
	must(t, d.MapMem(va+g, 2*MiB, 2*MiB, h2)) // second half of h2
	must(t, d.MapMem(va+2*g, 2*MiB, 0, h2))   // a handle may back several ranges

	// Mapping an already mapped range, fully or partly, is an error.
	wantCode(t, d.MapMem(va, 2*MiB, 0, h2), ErrParamInvalid)
	wantCode(t, d.MapMem(va+2*g, 4*MiB, 0, h2), ErrParamInvalid)
	// Freeing a mapped handle and releasing a mapped reservation are errors.
	wantCode(t, d.FreePhysical(h2), ErrParamInvalid)
	wantCode(t, d.ReleaseMemAddress(va), ErrParamInvalid)

	// Bad arguments.
	wantCode(t, d.MapMem(va+3*g+4096, 2*MiB, 0, h1), ErrAddrUnaligned)
	wantCode(t, d.MapMem(va+3*g, MiB, 0, h1), ErrParamInvalid)
	wantCode(t, d.MapMem(va+3*g, 0, 0, h1), ErrParamInvalid)
	wantCode(t, d.MapMem(va+3*g, 2*MiB, MiB, h2), ErrParamInvalid)
	wantCode(t, d.MapMem(va+3*g, 2*MiB, -2*MiB, h2), ErrParamInvalid)
	wantCode(t, d.MapMem(va+3*g, 4*MiB, 2*MiB, h2), ErrParamInvalid) // beyond the handle
	wantCode(t, d.MapMem(va+3*g, 4*MiB, 0, h2), ErrParamInvalid)     // beyond the reservation
	wantCode(t, d.MapMem(va+8*g, 2*MiB, 0, h1), ErrParamInvalid)     // outside any reservation
	wantCode(t, d.MapMem(va+3*g, 2*MiB, 0, 999), ErrInvalidHandle)

	// Unmap only at a mapping's start.
	wantCode(t, d.UnmapMem(va+3*g), ErrParamInvalid)
	wantCode(t, d.UnmapMem(va+1), ErrParamInvalid)
	wantCode(t, d.UnmapMem(0), ErrParamInvalid)
	must(t, d.UnmapMem(va+g))
	wantCode(t, d.UnmapMem(va+g), ErrParamInvalid)   // twice
	wantCode(t, d.FreePhysical(h2), ErrParamInvalid) // still mapped at va+2g
	must(t, d.MapMem(va+g, 2*MiB, 0, h1))            // the hole can be mapped again
	must(t, d.UnmapMem(va+2*g))
	must(t, d.FreePhysical(h2))
	must(t, d.UnmapMem(va))
	wantCode(t, d.ReleaseMemAddress(va), ErrParamInvalid) // va+g still mapped
	must(t, d.UnmapMem(va+g))
	must(t, d.FreePhysical(h1))
	must(t, d.ReleaseMemAddress(va))
	if free, _ := memInfo(t, d); free != 64*MiB {
		t.Fatalf("free %d after tearing everything down", free)
	}
}

// TestExpandableSegmentSequence follows the torch_npu call order: reserve,
// map pages as the segment grows, unmap and free them as it shrinks.
func TestExpandableSegmentSequence(t *testing.T) {
	d, _ := newTestDevice(t) // full-size device
	_, total := memInfo(t, d)
	seg := 20 * MiB
	vaSize := seg * ((total*9/8 + seg - 1) / seg)
	va, err := d.ReserveMemAddress(vaSize, 0, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var hs []PhysHandle
	for i := range 5 {
		h := mustPhys(t, d, seg)
		must(t, d.MapMem(va+uint64(int64(i)*seg), seg, 0, h))
		hs = append(hs, h)
	}
	if free, _ := memInfo(t, d); free != total-5*seg {
		t.Fatalf("free %d after mapping 100 MiB", free)
	}
	must(t, d.SynchronizeDevice())
	for i := len(hs) - 1; i >= 0; i-- {
		must(t, d.UnmapMem(va+uint64(int64(i)*seg)))
		must(t, d.FreePhysical(hs[i]))
	}
	must(t, d.ReleaseMemAddress(va))
	if free, _ := memInfo(t, d); free != total {
		t.Fatalf("free %d, want %d", free, total)
	}
}
