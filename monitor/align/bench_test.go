package align_test

import (
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/align"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// bigLoop is a 1,000,002-entry trace of a loop over 64 addresses (alloc,
// free_requested, free_completed each) and its FRAMEWORK records with
// totals, 1 in 100 of them lost.
func bigLoop() (*snapshot.Snapshot, []profiler.MemoryRecord) {
	const n = 1_000_002
	tr := make([]snapshot.TraceEntry, 0, n)
	recs := make([]profiler.MemoryRecord, 0, n)
	t := int64(1_700_000_000_000_000)
	var alloc, active int64
	for k := 0; len(tr) < n; k++ {
		addr, size := uint64(0x10000000+(k%64)*0x200000), int64(512*(1+k%64))
		for _, a := range []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted} {
			t++
			switch a {
			case snapshot.ActionAlloc:
				alloc, active = alloc+size, active+size
			case snapshot.ActionFreeRequested:
				alloc -= size
			default:
				active -= size
			}
			tr = append(tr, snapshot.TraceEntry{Action: a, Addr: addr, Size: size})
			if len(tr)%100 == 0 {
				continue
			}
			kind, sz, _ := profiler.MemoryKindOf(a, size)
			recs = append(recs, profiler.MemoryRecord{TimeNS: t * 1000, Component: profiler.CompPTA, Ptr: addr,
				AllocSize: sz, Kind: kind, Allocated: alloc, Active: active, HasAllocated: true, HasActive: true})
		}
	}
	return &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}}, recs
}

// BenchmarkRecover1M aligns the 1,000,002-entry trace with its records;
// BenchmarkStats1M is `npumon stats` (replay.StatsFile) of the same trace
// as a pickle, the baseline (BENCHMARKS.md).
func BenchmarkRecover1M(b *testing.B) {
	s, recs := bigLoop()
	tr := s.DeviceTraces[0]
	run := []align.Run{{Data: &profiler.Data{Path: "run", Memory: recs}}}
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		for i := range tr {
			tr[i].TimeUS = 0
		}
		s.TimeExact = nil
		res := align.Recover(s, run, align.Options{})
		if d := res.Device(0); d.Share() < 0.98 {
			b.Fatalf("share %.4f", d.Share())
		}
	}
}

func BenchmarkStats1M(b *testing.B) {
	s, _ := bigLoop()
	path := filepath.Join(b.TempDir(), "snap.pickle")
	if err := replay.WriteFile(path, s, replay.WritePickle, 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := replay.StatsFile(path, replay.StatsOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
