package profiler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// randomTrace is a trace of allocations freed in two steps (or, legacy,
// in one), with segment events and OOMs between them that have no record,
// and the allocator's totals after each entry.
func randomTrace(r *rand.Rand, n int, legacy bool) ([]snapshot.TraceEntry, []Totals) {
	var out []snapshot.TraceEntry
	var after []Totals
	live := map[uint64]int64{}
	pending := map[uint64]bool{}
	var tot Totals
	tot.Reserved = 1 << 30
	t := int64(1_700_000_000_000_000)
	for len(out) < n {
		t += r.Int64N(50)
		e := snapshot.TraceEntry{TimeUS: t, Stream: uint64(r.IntN(3))}
		var addrs []uint64
		for a := range live {
			addrs = append(addrs, a)
		}
		switch k := r.IntN(10); {
		case k == 0:
			e.Action, e.Addr, e.Size = snapshot.ActionSegmentAlloc, uint64(r.IntN(1<<20))<<21, 2<<20
		case k == 1:
			e.Action, e.DeviceFree, e.Size = snapshot.ActionOOM, 1<<20, 4<<20
		case k < 6 || len(addrs) == 0:
			e.Action, e.Addr, e.Size = snapshot.ActionAlloc, uint64(r.IntN(1<<30))<<9|1<<40, int64(r.IntN(1<<16)+1)*512
			if _, ok := live[e.Addr]; ok {
				continue
			}
			live[e.Addr] = e.Size
			tot.Allocated += e.Size
			tot.Active += e.Size
		default:
			a := addrs[r.IntN(len(addrs))]
			e.Addr, e.Size = a, live[a]
			switch {
			case legacy:
				e.Action = snapshot.ActionFree
				tot.Allocated -= e.Size
				tot.Active -= e.Size
				delete(live, a)
			case pending[a]:
				e.Action = snapshot.ActionFreeCompleted
				tot.Active -= e.Size
				delete(live, a)
				delete(pending, a)
			default:
				e.Action = snapshot.ActionFreeRequested
				tot.Allocated -= e.Size
				pending[a] = true
			}
		}
		out = append(out, e)
		after = append(after, tot)
	}
	return out, after
}

// Entries → memory_usage records → entries gives the alloc/free family
// back with the totals each record states; segment events and OOMs have no
// record.
func TestTraceMemoryRoundTrip(t *testing.T) {
	for seed := range uint64(20) {
		legacy := seed%4 == 3
		t.Run(fmt.Sprintf("seed%d-legacy%v", seed, legacy), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 6))
			trace, after := randomTrace(r, 500, legacy)
			var recs []MemoryRecord
			var want []snapshot.TraceEntry
			var wantAfter []Totals
			init := Totals{Reserved: 1 << 30}
			for i := range trace {
				e := &trace[i]
				m, ok := MemoryUsageFromTrace(1, e, after[i], e.TimeUS*1000, 9, 8)
				if _, _, has := MemoryKindOf(e.Action, e.Size); ok != has {
					t.Fatalf("entry %d (%s): record %v, kind %v", i, e.Action, ok, has)
				}
				if !ok {
					if e.Action == snapshot.ActionAlloc || e.Action == snapshot.ActionFree ||
						e.Action == snapshot.ActionFreeRequested || e.Action == snapshot.ActionFreeCompleted {
						t.Fatalf("entry %d: %s has no record", i, e.Action)
					}
					if len(want) == 0 {
						init = after[i]
					}
					continue
				}
				// as ReadDir decodes a FRAMEWORK memory record
				recs = append(recs, memoryRecordOf(&m, m.TimeNS))
				want = append(want, snapshot.TraceEntry{Action: e.Action, Addr: e.Addr, Size: e.Size, Stream: e.Stream, TimeUS: e.TimeUS})
				wantAfter = append(wantAfter, after[i])
			}
			got := TraceFromMemory(recs, 8)
			if len(got) != 2 || len(got[0].Entries) != 0 || !got[0].Complete {
				t.Fatalf("devices: %d, device 0 %+v", len(got), got[0])
			}
			d := got[1]
			if !reflect.DeepEqual(d.Entries, want) {
				for i := range min(len(d.Entries), len(want)) {
					if d.Entries[i] != want[i] {
						t.Fatalf("entry %d: %+v, want %+v", i, d.Entries[i], want[i])
					}
				}
				t.Fatalf("%d entries, want %d", len(d.Entries), len(want))
			}
			if !reflect.DeepEqual(d.After, wantAfter) || d.Init != init || !d.Complete {
				t.Fatalf("totals: init %+v (want %+v), complete %v", d.Init, init, d.Complete)
			}
		})
	}
}
