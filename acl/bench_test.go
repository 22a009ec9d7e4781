package acl

import (
	"testing"
	"time"
)

// BenchmarkMallocFree is one Malloc+Free pair on an empty device.
func BenchmarkMallocFree(b *testing.B) {
	d, _ := newTestDevice(b)
	b.ReportAllocs()
	for b.Loop() {
		p, err := d.Malloc(4096, HugeFirst)
		if err != nil {
			b.Fatal(err)
		}
		d.Free(p)
	}
}

// BenchmarkMallocFreeFragmented is the same pair on a device holding 1000
// live allocations with holes between them, so first fit scans a long map.
func BenchmarkMallocFreeFragmented(b *testing.B) {
	d, _ := newTestDevice(b)
	var ptrs []uint64
	for range 2000 {
		p, _ := d.Malloc(1000, NormalOnly)
		ptrs = append(ptrs, p)
	}
	for i := 0; i < len(ptrs); i += 2 {
		d.Free(ptrs[i]) // 1000 holes of 1056 B
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := d.Malloc(4096, HugeFirst) // fits no hole: scans all 1000
		if err != nil {
			b.Fatal(err)
		}
		d.Free(p)
	}
}

// BenchmarkLaunchQueryEvent is one stream launch, event record and query.
func BenchmarkLaunchQueryEvent(b *testing.B) {
	d, clk := newTestDevice(b)
	s, _ := d.CreateStream()
	e, _ := d.CreateEvent()
	b.ReportAllocs()
	for b.Loop() {
		d.Launch(s, time.Microsecond)
		d.RecordEvent(e, s)
		if _, err := d.QueryEvent(e); err != nil {
			b.Fatal(err)
		}
		clk.Advance(time.Microsecond)
	}
}

// BenchmarkBaselineMapSetDelete is the floor under MallocFree: the
// allocation table's map insert and delete alone, under a mutex.
func BenchmarkBaselineMapSetDelete(b *testing.B) {
	var d Device
	m := make(map[uint64]allocation)
	b.ReportAllocs()
	k := uint64(HBMBase)
	for b.Loop() {
		d.mu.Lock()
		m[k] = allocation{footprint: 4096}
		d.mu.Unlock()
		d.mu.Lock()
		delete(m, k)
		d.mu.Unlock()
	}
}
