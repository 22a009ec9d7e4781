package align_test

import (
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/align"
	"github.com/npumon/npumon/profiler"
)

// loopTrace is a small training loop's trace (the same addresses every
// step) with its times, and the FRAMEWORK records of it.
func loopTrace() ([]snapshot.TraceEntry, []profiler.MemoryRecord) {
	var tr []snapshot.TraceEntry
	var recs []profiler.MemoryRecord
	t := int64(1_700_000_000_000_000)
	for step := 0; step < 6; step++ {
		for k := 0; k < 5; k++ {
			addr, size := uint64(0x1000000+k*0x100000), int64(512*(k+1))
			for _, a := range []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted} {
				t += 3
				tr = append(tr, snapshot.TraceEntry{Action: a, Addr: addr, Size: size, TimeUS: t})
				kind, sz, _ := profiler.MemoryKindOf(a, size)
				recs = append(recs, profiler.MemoryRecord{TimeNS: t * 1000, Component: profiler.CompPTA, Ptr: addr,
					AllocSize: sz, Kind: kind})
			}
		}
		t += 1
		tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionSegmentAlloc, Addr: 0x9000000, Size: 2 << 20, TimeUS: t})
	}
	return tr, recs
}

// FuzzRecover: records shuffled (times kept), dropped or made up, the trace
// cut: Recover never panics, never matches more than there are events and
// its times stay monotone; untouched records match every event exactly.
func FuzzRecover(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 3, 1, 7, 2, 9})
	f.Add([]byte{3, 20, 0, 1, 0, 2, 1, 40, 1, 41})
	f.Fuzz(func(t *testing.T, ops []byte) {
		tr, recs := loopTrace()
		truth := make([]int64, len(tr))
		for i := range tr {
			truth[i] = tr[i].TimeUS
			tr[i].TimeUS = 0
		}
		for k := 0; k+1 < len(ops) && len(recs) > 0; k += 2 {
			j := int(ops[k+1]) % len(recs)
			switch ops[k] % 4 {
			case 0: // lost
				recs = append(recs[:j], recs[j+1:]...)
			case 1: // swapped with its neighbour, times kept in order
				if j+1 < len(recs) {
					recs[j], recs[j+1] = recs[j+1], recs[j]
					recs[j].TimeNS, recs[j+1].TimeNS = recs[j+1].TimeNS, recs[j].TimeNS
				}
			case 2: // a record of another address
				r := recs[j]
				r.Ptr += 0x40
				recs = append(recs[:j+1], append([]profiler.MemoryRecord{r}, recs[j+1:]...)...)
			case 3: // the trace starts later
				if j < len(tr) {
					tr, truth = tr[j:], truth[j:]
				}
			}
		}
		s := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}}
		res := align.Recover(s, []align.Run{{Data: &profiler.Data{Path: "run", Memory: recs}}}, align.Options{})
		d := res.Device(0)
		if d == nil {
			if len(tr) > 0 {
				t.Fatal("no device result")
			}
			return
		}
		if d.Matched > d.Events {
			t.Fatalf("%d matched of %d", d.Matched, d.Events)
		}
		for i := range tr {
			if i > 0 && tr[i].TimeUS < tr[i-1].TimeUS {
				t.Fatalf("entry %d: time %d before %d", i, tr[i].TimeUS, tr[i-1].TimeUS)
			}
		}
		if len(ops) == 0 {
			for i := range tr {
				if tr[i].Action != snapshot.ActionSegmentAlloc && (!d.Exact[i] || tr[i].TimeUS != truth[i]) {
					t.Fatalf("entry %d: %d, want %d exactly", i, tr[i].TimeUS, truth[i])
				}
			}
		}
	})
}
