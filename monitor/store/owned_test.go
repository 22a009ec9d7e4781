package store

import (
	"reflect"
	"slices"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// sameStores requires a, ingested by IngestSnapshot, and b, by IngestOwned
// of a copy of the same capture, to answer every query alike.
func sameStores(t *testing.T, name string, a, b *Store) {
	t.Helper()
	if !slices.Equal(a.Devices(), b.Devices()) {
		t.Fatalf("%s: devices %v, owned %v", name, a.Devices(), b.Devices())
	}
	for _, dev := range a.Devices() {
		n := a.Len(dev)
		if b.Len(dev) != n || a.TimeBase(dev) != b.TimeBase(dev) {
			t.Fatalf("%s device %d: Len %d / %d, time base %v / %v", name, dev, n, b.Len(dev), a.TimeBase(dev), b.TimeBase(dev))
		}
		if ea, eb := a.EventsAroundSeq(dev, 0, 0, int(n)), b.EventsAroundSeq(dev, 0, 0, int(n)); !reflect.DeepEqual(ea, eb) {
			t.Fatalf("%s device %d: events differ", name, dev)
		}
		stride := max(1, n/200)
		for i := int64(0); i <= n; i += stride {
			if sa, sb := a.StateAtSeq(dev, i), b.StateAtSeq(dev, i); !reflect.DeepEqual(sa, sb) {
				t.Fatalf("%s device %d position %d: state\n%+v\nowned\n%+v", name, dev, i, sa, sb)
			}
			if sa, sb := a.SummaryAtSeq(dev, i), b.SummaryAtSeq(dev, i); !reflect.DeepEqual(sa, sb) {
				t.Fatalf("%s device %d position %d: summary\n%+v\nowned\n%+v", name, dev, i, sa, sb)
			}
		}
		t0, t1 := a.Bounds(dev)
		if sa, sb := a.Series(dev, t0, t1+1, 97), b.Series(dev, t0, t1+1, 97); !reflect.DeepEqual(sa, sb) {
			t.Fatalf("%s device %d: series differ", name, dev)
		}
		for _, act := range []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeCompleted, snapshot.ActionSegmentAlloc, snapshot.ActionOOM} {
			ca, oka := a.Next(dev, t0-1, act)
			cb, okb := b.Next(dev, t0-1, act)
			pa, _ := a.Prev(dev, t1+1, act)
			pb, _ := b.Prev(dev, t1+1, act)
			if ca != cb || oka != okb || pa != pb {
				t.Fatalf("%s device %d action %v: Next/Prev differ", name, dev, act)
			}
		}
	}
}

// copies returns fresh shallow copies of s whose trace lists IngestOwned
// may empty (the entries are shared: neither ingest changes them).
func copies(s *snapshot.Snapshot) func() *snapshot.Snapshot {
	return func() *snapshot.Snapshot {
		c := *s
		c.DeviceTraces = slices.Clone(s.DeviceTraces)
		return &c
	}
}

// checkOwned ingests two copies of one capture, plainly and owned, and
// requires the same Store and the trace back entry for entry.
func checkOwned(t *testing.T, name string, mk func() *snapshot.Snapshot) {
	t.Helper()
	plain, owned := mk(), mk()
	a, b := New(Options{CheckpointEvery: 64}), New(Options{CheckpointEvery: 64})
	if err := a.IngestSnapshot(plain); err != nil {
		t.Fatal(err)
	}
	if err := b.IngestOwned(owned); err != nil {
		t.Fatal(err)
	}
	sameStores(t, name, a, b)
	for dev, tr := range plain.DeviceTraces {
		if len(tr) == 0 {
			continue
		}
		if owned.DeviceTraces[dev] != nil && b.devs[dev].keep == nil {
			t.Fatalf("%s device %d: trace not dropped", name, dev)
		}
		got, ok := b.Trace(owned, dev)
		if !ok || !reflect.DeepEqual(got, tr) {
			t.Fatalf("%s device %d: Trace ok=%v, %d entries, differs from the decoded %d", name, dev, ok, len(got), len(tr))
		}
		if _, ok := a.Trace(plain, dev); ok {
			t.Fatalf("%s device %d: Trace of a plainly ingested log", name, dev)
		}
	}
}

// IngestOwned builds the Store IngestSnapshot builds, on every capture
// file and on generated ones, and Trace gives the trace back.
func TestIngestOwnedMatchesIngest(t *testing.T) {
	for _, p := range captureFiles(t) {
		checkOwned(t, p, func() *snapshot.Snapshot {
			c, err := replay.DecodeFile(p, replay.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return c.Snapshot
		})
	}
	for seed := uint64(1); seed <= 4; seed++ {
		checkOwned(t, "generated", copies(genCapture(seed, 3000, seed%2 == 0)))
	}
}

// Entries a record does not give back exactly — times going backwards, an
// oom entry with an address, free bytes on another entry — come back from
// the few the Store keeps aside; past 1/16 of the trace the Store keeps the
// trace itself.
func TestIngestOwnedInexactEntries(t *testing.T) {
	gen := genCapture(9, 4000, true)
	bend := func(every int) func() *snapshot.Snapshot {
		s := *gen
		tr := slices.Clone(gen.DeviceTraces[0])
		for i := every; i < len(tr); i += every {
			tr[i].TimeUS = tr[i-1].TimeUS - 5 // backwards
		}
		tr[10].DeviceFree = 77
		tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionOOM, Addr: 0x1234, Size: 1 << 20, DeviceFree: 4096, TimeUS: tr[len(tr)-1].TimeUS})
		s.DeviceTraces = [][]snapshot.TraceEntry{tr}
		return copies(&s)
	}
	checkOwned(t, "few inexact", bend(500))
	checkOwned(t, "many inexact", bend(3))
	s := New(Options{})
	snap := bend(3)()
	if err := s.IngestOwned(snap); err != nil {
		t.Fatal(err)
	}
	if s.devs[0].keep == nil || snap.DeviceTraces[0] == nil {
		t.Fatal("a trace mostly inexact was not kept")
	}
	snap = bend(500)()
	if err := s.IngestOwned(snap); err != nil {
		t.Fatal(err)
	}
	if s.devs[0].keep != nil || len(s.devs[0].inexact.seq) == 0 || snap.DeviceTraces[0] != nil {
		t.Fatalf("keep %v, %d inexact", s.devs[0].keep != nil, len(s.devs[0].inexact.seq))
	}
	// once the log is replaced, the trace is no longer snap's
	if err := s.IngestSnapshot(genCapture(3, 100, true)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Trace(snap, 0); ok {
		t.Fatal("Trace of a replaced log")
	}
}
