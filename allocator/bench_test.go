package allocator

import (
	"testing"
	"time"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/benchcpu"
)

// loop runs body b.N times and reports cpu-ns/op.
func loop(b *testing.B, body func()) {
	b.ReportAllocs()
	c0 := benchcpu.Now()
	n := 0
	for b.Loop() {
		body()
		n++
	}
	b.ReportMetric(float64(benchcpu.Now()-c0)/float64(n), "cpu-ns/op")
}

func benchAllocator(b *testing.B, conf string) (*Allocator, acl.Stream) {
	b.Helper()
	rt := acl.NewRuntime(acl.Config{})
	dev, _ := rt.Device(0)
	cfg, err := config.ParseConfig(conf)
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(dev, cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := dev.CreateStream()
	return a, s
}

// warmPool leaves a few live and a few cached blocks around, so the pool
// the pair works on is not trivial.
func warmPool(a *Allocator, s acl.Stream) {
	var keep []uint64
	for i := range 16 {
		p, _ := a.Malloc(int64(4096*(i+1)), s)
		keep = append(keep, p)
	}
	for i := 0; i < len(keep); i += 2 {
		_ = a.Free(keep[i])
	}
}

// benchPair measures a cache-hit Malloc+Free pair: the block comes from
// the pool (best fit, split) and goes back (merge) every iteration.
func benchPair(b *testing.B, a *Allocator, s acl.Stream) {
	warmPool(a, s)
	loop(b, func() {
		p, err := a.Malloc(8192, s)
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Free(p); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkMallocFreePair(b *testing.B) {
	b.Run("history=off", func(b *testing.B) {
		a, s := benchAllocator(b, "")
		benchPair(b, a, s)
	})
	b.Run("history=on", func(b *testing.B) {
		a, s := benchAllocator(b, "")
		a.RecordHistory(true, RecordAll, 1<<16)
		benchPair(b, a, s)
	})
	b.Run("history=on,ring=4096", func(b *testing.B) {
		a, s := benchAllocator(b, "")
		a.RecordHistory(true, RecordAll, 4096)
		benchPair(b, a, s)
	})
	b.Run("history=on,tracker", func(b *testing.B) {
		a, s := benchAllocator(b, "")
		a.RecordHistory(true, RecordAll, 1<<16)
		defer a.AttachTracker(func(int, snapshot.TraceEntry) {})()
		benchPair(b, a, s)
	})
	b.Run("history=on,stack", func(b *testing.B) {
		a, s := benchAllocator(b, "")
		a.RecordHistory(true, RecordAll, 1<<16)
		frames := []snapshot.Frame{{Filename: "model.py", Line: 10, Name: "forward"}, {Filename: "train.py", Line: 3, Name: "main"}}
		loop(b, func() {
			p, _ := a.MallocWithStack(8192, s, frames)
			_ = a.Free(p)
		})
	})
	b.Run("expandable,history=on", func(b *testing.B) {
		a, s := benchAllocator(b, "expandable_segments:True")
		a.RecordHistory(true, RecordAll, 1<<16)
		benchPair(b, a, s)
	})
}

var sinkI64 int64

func BenchmarkTimestamp(b *testing.B) {
	// tick is what allocators read on this machine (tickSource): the
	// counter where it is usable, else the runtime's clock.
	b.Run("tick", func(b *testing.B) {
		read := tickSource()
		if !counterUsable() {
			b.Log("the counter is not usable here: tick is nanotime")
		}
		loop(b, func() { sinkI64 += read() })
	})
	b.Run("counter", func(b *testing.B) { loop(b, func() { sinkI64 += cycleCounter() }) })
	b.Run("nanotime", func(b *testing.B) { loop(b, func() { sinkI64 += nanotime() }) })
	b.Run("time.Now", func(b *testing.B) { loop(b, func() { sinkI64 += time.Now().UnixNano() }) })
}

func BenchmarkSnapshot100k(b *testing.B) {
	a, s := benchAllocator(b, "")
	a.RecordHistory(true, RecordAll, 100_000)
	var live []uint64
	// Until 100,000 entries are recorded (a slot may hold two: the ring is
	// not full yet then, and it has not wrapped).
	recorded, counted := 0, 0
	for i := 0; recorded < 100_000; i++ {
		p, err := a.Malloc(int64(512+(i%997)*1024), s)
		if err != nil {
			b.Fatal(err)
		}
		live = append(live, p)
		if i%3 != 0 {
			_ = a.Free(live[0])
			live = live[1:]
		}
		for ; counted < len(a.ring.buf); counted++ {
			recorded += a.ring.buf[counted].count()
		}
	}
	loop(b, func() {
		snap := a.Snapshot()
		if len(snap.DeviceTraces[0]) != 100_000 {
			b.Fatal(len(snap.DeviceTraces[0]))
		}
	})
	b.ReportMetric(float64(a.active.len()), "live_blocks")
}

// BenchmarkHistoryOverhead alternates blocks of benchPair's cache-hit pairs
// between an allocator with history off and one with history on, so both
// see the same machine load, and reports the CPU cost of each and their
// ratio.
func BenchmarkHistoryOverhead(b *testing.B) {
	off, s1 := benchAllocator(b, "")
	on, s2 := benchAllocator(b, "")
	on.RecordHistory(true, RecordAll, 1<<16)
	warmPool(off, s1)
	warmPool(on, s2)
	pair := func(a *Allocator, s acl.Stream) {
		p, _ := a.Malloc(8192, s)
		_ = a.Free(p)
	}
	const block = 4096
	var tOff, tOn time.Duration
	n := 0
	for b.Loop() {
		c0 := benchcpu.Now()
		for range block {
			pair(off, s1)
		}
		c1 := benchcpu.Now()
		for range block {
			pair(on, s2)
		}
		tOff += c1 - c0
		tOn += benchcpu.Now() - c1
		n += block
	}
	b.ReportMetric(float64(tOff)/float64(n), "off-ns/pair")
	b.ReportMetric(float64(tOn)/float64(n), "on-ns/pair")
	b.ReportMetric(float64(tOn)/float64(tOff), "on/off")
}

// BenchmarkActiveTable compares the live-block table with a Go map: one
// insert, lookup and delete, the table work of a Malloc+Free pair.
func BenchmarkActiveTable(b *testing.B) {
	const base = uint64(0x12c0_0000_0000)
	blk := &block{}
	b.Run("ptrTable", func(b *testing.B) {
		var t ptrTable
		for i := range 64 {
			t.put(base+uint64(i)*4096, blk)
		}
		k := base + 100*4096
		loop(b, func() {
			t.put(k, blk)
			if t.get(k) == nil {
				b.Fatal("lost")
			}
			t.del(k)
		})
	})
	b.Run("map", func(b *testing.B) {
		m := map[uint64]*block{}
		for i := range 64 {
			m[base+uint64(i)*4096] = blk
		}
		k := base + 100*4096
		loop(b, func() {
			m[k] = blk
			if m[k] == nil {
				b.Fatal("lost")
			}
			delete(m, k)
		})
	})
}
