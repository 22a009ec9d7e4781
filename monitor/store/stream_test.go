package store

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/safefile"
	"github.com/npumon/npumon/replay"
)

// streamed feeds snap's traces into a fresh Store through an OwnedStream
// as a decoder would (list by list, in device order, in batches of 1 to
// maxBatch entries), calls between(st, entries so far) after each batch,
// and settles with a copy of snap whose traces are empty. It returns the
// Store and that copy (the owner Trace answers for).
func streamed(t *testing.T, snap *snapshot.Snapshot, maxBatch int, r *rand.Rand, between func(*Store, int)) (*Store, *snapshot.Snapshot) {
	t.Helper()
	st := New(Options{CheckpointEvery: 64})
	o := st.StreamOwned()
	tables := &replay.TraceTables{Stacks: snap.Stacks, Actions: snap.Actions, Texts: snap.Texts}
	lists := make([]int, len(snap.DeviceTraces))
	n, fed := 0, 0
	for dev, tr := range snap.DeviceTraces {
		lists[dev] = -1
		if len(tr) == 0 {
			continue
		}
		lists[dev] = n
		for i := 0; i < len(tr); {
			k := min(len(tr)-i, 1+r.IntN(maxBatch))
			o.TraceBatch(n, slices.Clone(tr[i:i+k]), tables)
			i += k
			fed += k
			if st.Settled() {
				t.Fatal("Settled while streaming")
			}
			if between != nil {
				between(st, fed)
			}
		}
		n++
	}
	owned := *snap
	owned.DeviceTraces = make([][]snapshot.TraceEntry, len(snap.DeviceTraces))
	if err := o.Finish(&owned, lists); err != nil {
		t.Fatal(err)
	}
	if !st.Settled() {
		t.Fatal("not Settled after Finish")
	}
	return st, &owned
}

// checkStreamed requires the Store an OwnedStream settles to answer every
// query as IngestSnapshot's of the same capture, and Trace to give the
// trace back entry for entry.
func checkStreamed(t *testing.T, name string, snap *snapshot.Snapshot, maxBatch int, seed uint64) {
	t.Helper()
	a := New(Options{CheckpointEvery: 64})
	if err := a.IngestSnapshot(copies(snap)()); err != nil {
		t.Fatal(err)
	}
	b, owned := streamed(t, snap, maxBatch, rand.New(rand.NewPCG(seed, 3)), nil)
	sameStores(t, name, a, b)
	for dev, tr := range snap.DeviceTraces {
		if len(tr) == 0 {
			continue
		}
		got, ok := b.Trace(owned, dev)
		if !ok || !reflect.DeepEqual(got, tr) {
			t.Fatalf("%s device %d: Trace ok=%v, %d entries, differs from the decoded %d", name, dev, ok, len(got), len(tr))
		}
	}
	if !reflect.DeepEqual(AnnotationOps(snap), b.OwnedAnnotationOps(owned)) {
		t.Fatalf("%s: annotation ops differ", name)
	}
}

// A streamed capture settles to the Store IngestSnapshot builds, on every
// capture file and on generated ones (with and without times, inexact
// entries, a trace list two devices share, a device whose trace is empty
// before one whose is not).
func TestOwnedStreamMatchesIngest(t *testing.T) {
	for i, p := range captureFiles(t) {
		c, err := replay.DecodeFile(p, replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkStreamed(t, p, c.Snapshot, 1+i*37%500, uint64(i))
		// and straight from the decoder
		a := New(Options{CheckpointEvery: 64})
		if err := a.IngestSnapshot(c.Snapshot); err != nil {
			t.Fatal(err)
		}
		b := New(Options{CheckpointEvery: 64})
		o := b.StreamOwned()
		cs, err := replay.DecodeFile(p, replay.Options{Trace: o})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Finish(cs.Snapshot, cs.TraceLists); err != nil {
			t.Fatal(err)
		}
		sameStores(t, p+" decoded", a, b)
		if !reflect.DeepEqual(AnnotationOps(c.Snapshot), b.OwnedAnnotationOps(cs.Snapshot)) {
			t.Fatalf("%s: annotation ops differ", p)
		}
	}
	for seed := uint64(1); seed <= 4; seed++ {
		checkStreamed(t, "generated", genCapture(seed, 3000, seed%2 == 0), 700, seed)
	}
	// no segment entries: settled from the provisional roll (settle.go),
	// with start blocks pending free and touched first by every kind of
	// entry, at checkpoint spacings down to one entry
	var fast, slow int
	settleHook = func(f bool) {
		if f {
			fast++
		} else {
			slow++
		}
	}
	defer func() { settleHook = nil }()
	for seed := uint64(1); seed <= 6; seed++ {
		fixed := genCaptureSegs(seed, 3000, seed%2 == 0, true)
		if slices.ContainsFunc(fixed.DeviceTraces[0], func(e snapshot.TraceEntry) bool { return e.Action.IsSegmentFamily() }) {
			t.Fatal("segment entries in a fixed-segment capture")
		}
		if seed > 3 { // final blocks the trace's allocs do not give: whole in the checkpoints
			for i := range fixed.Segments {
				for j := range fixed.Segments[i].Blocks {
					if b := &fixed.Segments[i].Blocks[j]; b.State.Active() && j%3 == 0 {
						b.RequestedSize++
						b.Frames = 2
					}
				}
			}
		}
		checkStreamed(t, "fixed segments", fixed, int(50*seed), seed)
	}
	if fast != 6 || slow != 0 {
		t.Fatalf("fixed segments: %d settled from the provisional roll, %d rolled again; want 6, 0", fast, slow)
	}
	gen := genCapture(9, 4000, true)
	tr := slices.Clone(gen.DeviceTraces[0])
	for i := 3; i < len(tr); i += 3 {
		tr[i].TimeUS = tr[i-1].TimeUS - 5 // backwards: inexact
	}
	tr[10].DeviceFree = 77
	tr = append(tr, snapshot.TraceEntry{Action: snapshot.ActionOOM, Addr: 0x1234, Size: 1 << 20, DeviceFree: 4096, TimeUS: tr[len(tr)-1].TimeUS})
	bent := *gen
	bent.DeviceTraces = [][]snapshot.TraceEntry{tr}
	checkStreamed(t, "inexact", &bent, 300, 5)
	// a timed entry only late in the trace: the log's times turn to epoch µs
	late := *genCapture(11, 2000, false)
	lt := slices.Clone(late.DeviceTraces[0])
	lt[1500].TimeUS = 123
	late.DeviceTraces = [][]snapshot.TraceEntry{lt}
	checkStreamed(t, "late time", &late, 200, 6)
	// device 1's trace with device 0's empty: list 0 is device 1
	moved := *gen
	moved.DeviceTraces = [][]snapshot.TraceEntry{nil, gen.DeviceTraces[0]}
	for i := range moved.Segments {
		moved.Segments[i].Device = 1
	}
	checkStreamed(t, "second device", &moved, 500, 7)
}

// A trace list two devices share (a pickle may memo one list twice)
// settles as two logs of the same entries.
func TestOwnedStreamSharedList(t *testing.T) {
	gen := genCapture(4, 1500, true)
	b := New(Options{CheckpointEvery: 64})
	o := b.StreamOwned()
	tables := &replay.TraceTables{Stacks: gen.Stacks, Actions: gen.Actions, Texts: gen.Texts}
	o.TraceBatch(0, slices.Clone(gen.DeviceTraces[0]), tables)
	owned := *gen
	owned.DeviceTraces = make([][]snapshot.TraceEntry, 2)
	if err := o.Finish(&owned, []int{0, 0}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Devices(), []int{0, 1}) || b.Len(0) != b.Len(1) || b.Len(1) != int64(len(gen.DeviceTraces[0])) {
		t.Fatalf("devices %v, lengths %d, %d", b.Devices(), b.Len(0), b.Len(1))
	}
	tr0, _ := b.Trace(&owned, 0)
	tr1, ok := b.Trace(&owned, 1)
	if !ok || !reflect.DeepEqual(tr0, tr1) || !reflect.DeepEqual(tr0, gen.DeviceTraces[0]) {
		t.Fatal("the shared list's traces differ")
	}
}

// While a capture streams in, the Store holds a growing prefix: its
// entries are the final log's first ones, and every query answers over
// it while batches land (under -race: no race), none panics.
func TestOwnedStreamPrefixQueries(t *testing.T) {
	gen := genCapture(2, 6000, true)
	final := New(Options{CheckpointEvery: 64})
	if err := final.IngestSnapshot(copies(gen)()); err != nil {
		t.Fatal(err)
	}
	want := final.EventsAroundSeq(0, 0, 0, len(gen.DeviceTraces[0]))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var st atomic.Pointer[Store]
	var queries atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			s := st.Load()
			if s == nil {
				continue
			}
			for _, dev := range s.Devices() {
				n := s.Len(dev)
				t0, t1 := s.Bounds(dev)
				for _, i := range []int64{0, n / 3, n / 2, n} {
					s.StateAtSeq(dev, i)
					s.SummaryAtSeq(dev, i)
					s.LiveAtSeq(dev, i)
				}
				s.Series(dev, t0, t1+1, 50)
				s.Next(dev, t0, snapshot.ActionAlloc)
				s.Prev(dev, t1, snapshot.ActionFreeCompleted)
				s.EventsAroundSeq(dev, n/2, 5, 5)
				s.Peak(dev)
				s.Categories(dev)
				queries.Add(1)
			}
		}
	}()
	batches := 0
	streamed(t, gen, 400, rand.New(rand.NewPCG(1, 1)), func(s *Store, fed int) {
		st.Store(s)
		batches++
		if got := s.Len(0); got != int64(fed) {
			t.Fatalf("after %d entries the log holds %d", fed, got)
		}
		if ev := s.EventsAroundSeq(0, 0, 0, fed); !reflect.DeepEqual(ev, want[:fed]) {
			t.Fatalf("after %d entries the prefix's events differ from the final log's", fed)
		}
	})
	stop.Store(true)
	wg.Wait()
	if batches < 10 {
		t.Fatalf("%d batches", batches)
	}
}

// A decode that fails mid-trace leaves nothing of the file in the Store:
// its error is DecodeFile's (file and offset), and the streamed prefix is
// removed (Abort), the Store Settled again.
func TestOwnedStreamAbort(t *testing.T) {
	path := "../../replay/testdata/bad_truncated.pickle"
	_, want := replay.DecodeFile(path, replay.Options{})
	if want == nil {
		t.Fatal("bad_truncated decodes")
	}
	st := New(Options{})
	o := st.StreamOwned()
	_, err := replay.DecodeFile(path, replay.Options{Trace: o})
	var oe *safefile.OffsetError
	if err == nil || err.Error() != want.Error() || !errors.As(err, &oe) {
		t.Fatalf("streamed error %v, want %v", err, want)
	}
	o.Abort()
	if len(st.Devices()) != 0 || !st.Settled() {
		t.Fatalf("after Abort: devices %v, settled %v", st.Devices(), st.Settled())
	}
	o.Abort() // twice is harmless
	if !st.Settled() {
		t.Fatal("a second Abort unsettled the Store")
	}
}

// entryReader gives what entryAt gives, read forward, backward and at
// random, inexact entries among them.
func TestEntryReaderAgreesWithEntryAt(t *testing.T) {
	gen := genCapture(9, 3000, true)
	tr := slices.Clone(gen.DeviceTraces[0])
	for i := 3; i < len(tr); i += 7 {
		tr[i].TimeUS = tr[i-1].TimeUS - 5 // backwards: inexact
	}
	tr[0].DeviceFree, tr[len(tr)-1].DeviceFree = 3, 4
	bent := *gen
	bent.DeviceTraces = [][]snapshot.TraceEntry{tr}
	st, _ := streamed(t, &bent, 300, rand.New(rand.NewPCG(1, 2)), nil)
	d := st.devs[0]
	if len(d.inexact.seq) < 100 {
		t.Fatalf("%d inexact entries", len(d.inexact.seq))
	}
	rd := entryReader{d: d}
	check := func(i int) {
		var e snapshot.TraceEntry
		rd.read(i, &e)
		if e != d.entryAt(int64(i)) || e != tr[i] {
			t.Fatalf("entry %d: %+v, entryAt %+v, trace %+v", i, e, d.entryAt(int64(i)), tr[i])
		}
	}
	for i := range tr {
		check(i)
	}
	for i := len(tr) - 1; i >= 0; i-- {
		check(i)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		check(r.IntN(len(tr)))
	}
}
