package align_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/align"
	"github.com/npumon/npumon/profiler"
)

// resultSum hashes everything Recover decides: per device the source,
// counts, every entry's time and exactness, and the refusals.
func resultSum(s *snapshot.Snapshot, res align.Result) string {
	h := fnv.New64a()
	for _, d := range res.Devices {
		fmt.Fprintf(h, "%d %s %s %d %d|", d.Device, d.Source, d.From, d.Events, d.Matched)
		for i, e := range s.DeviceTraces[d.Device] {
			x := d.Exact != nil && d.Exact[i]
			fmt.Fprintf(h, "%d%t,", e.TimeUS, x)
		}
	}
	for _, r := range res.Refused {
		fmt.Fprintln(h, r)
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// mangle applies the fuzz test's operations (lost, swapped, foreign
// records, a later trace start) chosen by rng.
func mangle(rng *rand.Rand, tr []snapshot.TraceEntry, recs []profiler.MemoryRecord, nops int) ([]snapshot.TraceEntry, []profiler.MemoryRecord) {
	for k := 0; k < nops && len(recs) > 0; k++ {
		j := rng.IntN(len(recs))
		switch rng.IntN(4) {
		case 0:
			recs = append(recs[:j], recs[j+1:]...)
		case 1:
			if j+1 < len(recs) {
				recs[j], recs[j+1] = recs[j+1], recs[j]
				recs[j].TimeNS, recs[j+1].TimeNS = recs[j+1].TimeNS, recs[j].TimeNS
			}
		case 2:
			r := recs[j]
			r.Ptr += 0x40
			recs = append(recs[:j+1], append([]profiler.MemoryRecord{r}, recs[j+1:]...)...)
		case 3:
			if j < len(tr) && rng.IntN(4) == 0 {
				tr = tr[j:]
			}
		}
	}
	return tr, recs
}

// TestRecoverUnchanged pins Recover's output (the sums below were taken
// before the matcher was made faster): the big loop, its records as
// totals only, and mangled small loops from one and two runs.
func TestRecoverUnchanged(t *testing.T) {
	var sums []string
	s, recs := bigLoop()
	res := align.Recover(s, []align.Run{{Data: &profiler.Data{Path: "run", Memory: recs}}}, align.Options{})
	sums = append(sums, resultSum(s, res))
	s, recs = bigLoop()
	s.DeviceTraces[0] = s.DeviceTraces[0][:200_000]
	for i := range recs {
		recs[i].Ptr = 0
	}
	res = align.Recover(s, []align.Run{{Data: &profiler.Data{Path: "run", Memory: recs[:150_000]}}}, align.Options{})
	sums = append(sums, resultSum(s, res))
	rng := rand.New(rand.NewPCG(1, 2))
	h := fnv.New64a()
	for c := 0; c < 300; c++ {
		tr, recs := loopTrace()
		for i := range tr {
			tr[i].TimeUS = 0
		}
		tr, recs = mangle(rng, tr, recs, rng.IntN(12))
		runs := []align.Run{{Data: &profiler.Data{Path: "a", Memory: recs}}}
		if c%3 == 0 {
			// split into two runs at a record
			k := rng.IntN(len(recs) + 1)
			a := append([]profiler.MemoryRecord(nil), recs[:k]...)
			b := append([]profiler.MemoryRecord(nil), recs[k:]...)
			runs = []align.Run{{Data: &profiler.Data{Path: "b", Memory: b}}, {Data: &profiler.Data{Path: "a", Memory: a}}}
		}
		if c%5 == 0 {
			for i := range recs {
				recs[i].Ptr = 0
				recs[i].HasAllocated = true
				recs[i].Allocated = int64(i%7) * 512
			}
		}
		s := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{tr}}
		fmt.Fprintln(h, resultSum(s, align.Recover(s, runs, align.Options{})))
	}
	sums = append(sums, fmt.Sprintf("%016x", h.Sum64()))
	want := []string{"a2ef9576f0298068", "b9713a3c9e9beb6a", "8e2c41031067a88a"}
	for i := range sums {
		if sums[i] != want[i] {
			t.Errorf("case %d: sum %s, want %s", i, sums[i], want[i])
		}
	}
}
