package acl

import (
	"fmt"
	"strings"
	"testing"
)

func mustMalloc(t *testing.T, d *Device, size int64, p MallocPolicy) uint64 {
	t.Helper()
	ptr, err := d.Malloc(size, p)
	if err != nil {
		t.Fatalf("Malloc(%d, %d): %v", size, p, err)
	}
	return ptr
}

func footprint(t *testing.T, d *Device, ptr uint64) int64 {
	t.Helper()
	n, ok := d.AllocationSize(ptr)
	if !ok {
		t.Fatalf("%#x is not live", ptr)
	}
	return n
}

func TestMallocRoundingAndPad(t *testing.T) {
	for i, c := range []struct {
		size, malloc, align32 int64
	}{
		{1, 64, 32}, {31, 64, 32}, {32, 64, 32}, {33, 96, 64}, {512, 544, 512}, {1000, 1056, 1024},
		{1 << 20, 1<<20 + 32, 1 << 20}, // exactly 1 MiB: still normal pages under HugeFirst
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			d := smallDevice(t, 64)
			p := mustMalloc(t, d, c.size, HugeFirst)
			if got := footprint(t, d, p); got != c.malloc {
				t.Errorf("Malloc(%d) footprint %d, want %d", c.size, got, c.malloc)
			}
			q, err := d.MallocAlign32(c.size, HugeFirst)
			if err != nil {
				t.Fatal(err)
			}
			if got := footprint(t, d, q); got != c.align32 {
				t.Errorf("MallocAlign32(%d) footprint %d, want %d", c.size, got, c.align32)
			}
			free, _ := memInfo(t, d)
			if free != 64*MiB-c.malloc-c.align32 {
				t.Errorf("size %d: free %d after both", c.size, free)
			}
			if info := d.Info(); info.HBMUsed != c.malloc+c.align32 {
				t.Errorf("size %d: HBMUsed %d", c.size, info.HBMUsed)
			}
		})
	}
}

func TestMallocNormalPlacement(t *testing.T) {
	d := smallDevice(t, 64)
	a := mustMalloc(t, d, 1, NormalOnly)  // [0, 64)
	b := mustMalloc(t, d, 33, NormalOnly) // [64, 160)
	c := mustMalloc(t, d, 1, NormalOnly)  // 160 → 192 (64-B aligned start)
	if a != HBMBase || b != HBMBase+64 || c != HBMBase+192 {
		t.Fatalf("addresses %#x %#x %#x", a, b, c)
	}
	// The 32-B sliver [160, 192) stays free: a 1-B MallocAlign32 cannot use it
	// either, because starts are 64-B aligned.
	e, err := d.MallocAlign32(1, NormalOnly)
	if err != nil || e != HBMBase+256 {
		t.Fatalf("MallocAlign32 = %#x, %v", e, err)
	}
	// First fit: freeing b makes its hole the lowest fit again.
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	if f := mustMalloc(t, d, 20, NormalOnly); f != b {
		t.Fatalf("reuse: %#x, want %#x", f, b)
	}
}

func TestMallocHugePages(t *testing.T) {
	d := smallDevice(t, 64)
	small := mustMalloc(t, d, 100, HugeFirst) // normal pages, at base
	// 2 MiB + 32 B of pad needs two huge pages, 2 MiB aligned.
	big := mustMalloc(t, d, 2*MiB, HugeFirst)
	if big != HBMBase+uint64(2*MiB) || footprint(t, d, big) != 4*MiB {
		t.Fatalf("huge Malloc at %#x footprint %d", big, footprint(t, d, big))
	}
	// Without the pad 2 MiB is exactly one page.
	one, _ := d.MallocAlign32(2*MiB, HugeFirst)
	if one != HBMBase+uint64(6*MiB) || footprint(t, d, one) != 2*MiB {
		t.Fatalf("MallocAlign32 huge at %#x footprint %d", one, footprint(t, d, one))
	}
	// HugeOnly uses huge pages even for small sizes; the normal sliver after
	// `small` is skipped.
	h := mustMalloc(t, d, 1, HugeOnly)
	if h != HBMBase+uint64(8*MiB) || footprint(t, d, h) != 2*MiB {
		t.Fatalf("HugeOnly small at %#x footprint %d", h, footprint(t, d, h))
	}
	// Normal allocations fill the sliver left below the first huge page.
	n := mustMalloc(t, d, 1000, NormalOnly)
	if n != small+64*3 { // small took [0, 160) → next 64-B start is 192
		t.Fatalf("normal after huge at %#x, want %#x", n, small+192)
	}
	// P2P variants and bandwidth flags place like the plain policies.
	p := mustMalloc(t, d, 3*MiB, HugeFirstP2P|MemTypeHighBandWidth)
	if p%uint64(Granularity) != 0 || footprint(t, d, p) != 4*MiB {
		t.Fatalf("P2P huge at %#x footprint %d", p, footprint(t, d, p))
	}
	q := mustMalloc(t, d, 3*MiB, NormalOnlyP2P|MemTypeLowBandWidth|MemAccessUserSpaceReadonly)
	if footprint(t, d, q) != 3*MiB+32 {
		t.Fatalf("P2P normal footprint %d", footprint(t, d, q))
	}
}

func TestMallocHuge1G(t *testing.T) {
	d := smallDevice(t, 4096)
	mustMalloc(t, d, 1, NormalOnly)
	p := mustMalloc(t, d, GiB, Huge1GOnly) // 1 GiB pages: rounding only, no pad
	if p != HBMBase+uint64(GiB) || footprint(t, d, p) != GiB {
		t.Fatalf("Huge1GOnly at %#x footprint %d", p, footprint(t, d, p))
	}
	q := mustMalloc(t, d, GiB+1, Huge1GOnlyP2P)
	if q != HBMBase+uint64(2*GiB) || footprint(t, d, q) != 2*GiB {
		t.Fatalf("Huge1GOnlyP2P at %#x footprint %d", q, footprint(t, d, q))
	}
	_, err := d.Malloc(1, Huge1GOnly) // only [0,1 GiB) minus 64 B left
	wantCode(t, err, ErrMemoryAllocation)
}

func TestMallocHugeFirstFallback(t *testing.T) {
	d := smallDevice(t, 8)
	mustMalloc(t, d, 1, NormalOnly) // [0, 64): no 8 MiB of aligned huge pages left
	_, err := d.MallocAlign32(7*MiB, HugeOnly)
	wantCode(t, err, ErrMemoryAllocation)
	p, err := d.MallocAlign32(7*MiB, HugeFirst)
	if err != nil || p != HBMBase+64 || footprint(t, d, p) != 7*MiB {
		t.Fatalf("HugeFirst fallback = %#x, %v", p, err)
	}
}

func TestMallocFragmentation(t *testing.T) {
	d := smallDevice(t, 8)
	var ptrs [4]uint64
	for i := range ptrs {
		p, err := d.MallocAlign32(2*MiB, NormalOnly)
		if err != nil || p != HBMBase+uint64(i)*uint64(2*MiB) {
			t.Fatalf("block %d: %#x, %v", i, p, err)
		}
		ptrs[i] = p
	}
	_, err := d.Malloc(1, NormalOnly)
	wantCode(t, err, ErrMemoryAllocation)
	if err := d.Free(ptrs[0]); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(ptrs[2]); err != nil {
		t.Fatal(err)
	}
	free, _ := memInfo(t, d)
	if free != 4*MiB || d.LargestFreeRange() != 2*MiB {
		t.Fatalf("free %d largest %d", free, d.LargestFreeRange())
	}
	// 3 MiB < 4 MiB free, but no single range holds it.
	_, err = d.MallocAlign32(3*MiB, NormalOnly)
	wantCode(t, err, ErrMemoryAllocation)
	if !strings.Contains(err.Error(), "fragmented") {
		t.Errorf("message %q does not say the device is fragmented", err)
	}
	// Freeing the block between the holes coalesces them into 6 MiB.
	if err := d.Free(ptrs[1]); err != nil {
		t.Fatal(err)
	}
	if d.LargestFreeRange() != 6*MiB {
		t.Fatalf("largest after coalescing %d", d.LargestFreeRange())
	}
	p, err := d.MallocAlign32(3*MiB, NormalOnly)
	if err != nil || p != HBMBase {
		t.Fatalf("after coalescing: %#x, %v", p, err)
	}
}

func TestMallocDeterministic(t *testing.T) {
	seq := func() []uint64 {
		d := smallDevice(t, 256)
		var out, live []uint64
		for i := range 200 {
			size := int64(i)*7919%(3*MiB) + 1
			p, err := d.Malloc(size, MallocPolicy(i%3))
			if err != nil {
				out = append(out, 0)
				continue
			}
			out = append(out, p)
			live = append(live, p)
			if i%3 == 1 {
				d.Free(live[len(live)/2])
				live = append(live[:len(live)/2], live[len(live)/2+1:]...)
			}
		}
		return out
	}
	a, b := seq(), seq()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d: %#x then %#x", i, a[i], b[i])
		}
	}
}

func TestMallocInvalidArgs(t *testing.T) {
	d := smallDevice(t, 8)
	for i, c := range []struct {
		size int64
		p    MallocPolicy
	}{
		{0, HugeFirst}, {-1, HugeFirst}, {1 << 60, HugeFirst}, {1, 8}, {1, -1}, {1, 0x200}, {1, Huge1GOnlyP2P + 1},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			_, err := d.Malloc(c.size, c.p)
			wantCode(t, err, ErrParamInvalid)
			_, err = d.MallocAlign32(c.size, c.p)
			wantCode(t, err, ErrParamInvalid)
		})
	}
	// More than the device has is an allocation failure, not a bad argument.
	_, err := d.Malloc(9*MiB, HugeFirst)
	wantCode(t, err, ErrMemoryAllocation)
	if free, _ := memInfo(t, d); free != 8*MiB {
		t.Fatalf("failed calls changed free memory: %d", free)
	}
}

func TestFreeErrorsChangeNothing(t *testing.T) {
	d := smallDevice(t, 8)
	p := mustMalloc(t, d, 1000, NormalOnly)
	q := mustMalloc(t, d, 1000, NormalOnly)
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}
	free, _ := memInfo(t, d)
	largest := d.LargestFreeRange()
	for _, bad := range []uint64{p, q + 64, 0, HBMBase - 64, HBMBase + uint64(100*MiB)} {
		wantCode(t, d.Free(bad), ErrParamInvalid)
	}
	f, _ := memInfo(t, d)
	if f != free || d.LargestFreeRange() != largest {
		t.Fatalf("bad frees changed the map: free %d→%d largest %d→%d", free, f, largest, d.LargestFreeRange())
	}
	if _, ok := d.AllocationSize(q); !ok {
		t.Fatal("q was freed by a bad Free")
	}
	if err := d.Free(q); err != nil {
		t.Fatal(err)
	}
	if free, _ := memInfo(t, d); free != 8*MiB || d.LargestFreeRange() != 8*MiB {
		t.Fatalf("after freeing all: free %d largest %d", free, d.LargestFreeRange())
	}
}

func TestHBMLimit(t *testing.T) {
	d := smallDevice(t, 64)
	d.SetHBMLimit(4 * MiB)
	if free, total := memInfo(t, d); free != 4*MiB || total != 4*MiB {
		t.Fatalf("capped GetMemInfo %d, %d", free, total)
	}
	p, err := d.MallocAlign32(3*MiB, NormalOnly)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.MallocAlign32(2*MiB, NormalOnly) // the map has room, the cap does not
	wantCode(t, err, ErrMemoryAllocation)
	_, err = d.MallocPhysical(2 * MiB)
	wantCode(t, err, ErrMemoryAllocation)
	// A cap below current usage reports zero free, never negative.
	d.SetHBMLimit(MiB)
	if free, total := memInfo(t, d); free != 0 || total != MiB || d.Info().HBMTotal != MiB {
		t.Fatalf("cap below usage: %d, %d", free, total)
	}
	d.Free(p)
	d.SetHBMLimit(0)
	if free, total := memInfo(t, d); free != 64*MiB || total != 64*MiB {
		t.Fatalf("cap removed: %d, %d", free, total)
	}
	d.SetHBMLimit(128 * MiB) // a cap above capacity changes nothing
	if _, total := memInfo(t, d); total != 64*MiB {
		t.Fatalf("cap above capacity: total %d", total)
	}
}

func TestFailNthMalloc(t *testing.T) {
	d := smallDevice(t, 64)
	d.FailNthMalloc(3)
	if _, err := d.Malloc(1, HugeFirst); err != nil { // 1st
		t.Fatal(err)
	}
	if _, err := d.Malloc(0, HugeFirst); err == nil { // bad args do not count
		t.Fatal("Malloc(0) succeeded")
	}
	if _, err := d.MallocPhysical(2 * MiB); err != nil { // 2nd
		t.Fatal(err)
	}
	free, _ := memInfo(t, d)
	_, err := d.MallocAlign32(1, HugeFirst) // 3rd fails
	wantCode(t, err, ErrMemoryAllocation)
	if !strings.Contains(err.Error(), "injected") {
		t.Errorf("injected failure message %q", err)
	}
	if f, _ := memInfo(t, d); f != free {
		t.Fatal("an injected failure took memory")
	}
	if _, err := d.Malloc(1, HugeFirst); err != nil { // one-shot
		t.Fatalf("after the injected failure: %v", err)
	}
	d.FailNthMalloc(1)
	_, err = d.MallocPhysical(2 * MiB)
	wantCode(t, err, ErrMemoryAllocation)
	d.FailNthMalloc(2)
	d.FailNthMalloc(0) // disables
	for range 3 {
		if _, err := d.Malloc(1, HugeFirst); err != nil {
			t.Fatalf("disabled injection still failed: %v", err)
		}
	}
}
