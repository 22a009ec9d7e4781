package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/explain"
)

// segKey is what the agreement tests compare: segment placement and every
// live block (inactive blocks are the derived tiling).
type segKey struct {
	Addr   uint64
	Size   int64
	Stream uint64
	Live   []snapshot.Block
}

func keysOf(segs []snapshot.Segment) []segKey {
	out := make([]segKey, 0, len(segs))
	for _, s := range segs {
		k := segKey{Addr: s.Address, Size: s.TotalSize, Stream: s.Stream}
		var tiled int64
		for _, b := range s.Blocks {
			tiled += b.Size
			if b.State.Active() {
				k.Live = append(k.Live, snapshot.Block{Address: b.Address, Size: b.Size, RequestedSize: b.RequestedSize, State: b.State})
			}
		}
		out = append(out, k)
	}
	return out
}

// cursorAfter returns the cursor meaning "right after entry i" (i = -1: start).
func cursorAfter(st *Store, dev int, i int) int64 {
	if st.TimeBase(dev) == TimeSequence {
		return int64(i)
	}
	if i < 0 {
		first, _ := st.Bounds(dev)
		return first - 1
	}
	ev := st.Events(dev, -1<<62, 1<<62, i+1)
	return ev[i].Time
}

// checkAgreement compares every Store answer that the timeline defines with
// replay's oracle, after every entry.
func checkAgreement(t *testing.T, snap *snapshot.Snapshot, k int) {
	t.Helper()
	st := New(Options{CheckpointEvery: k})
	if err := st.IngestSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	for _, dev := range snap.Devices() {
		tl, err := replay.NewTimeline(snap, dev)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Len(dev); got != int64(len(tl.Entries)) {
			t.Fatalf("device %d: Len %d, want %d", dev, got, len(tl.Entries))
		}
		act := tl.ActiveSeries()
		// StateAfter is O(n): check every entry of small logs, a spread of
		// large ones (always including the first and last)
		stride := max(1, len(tl.Entries)/600)
		for i := -1; i < len(tl.Entries); i++ {
			if i >= 0 && i != len(tl.Entries)-1 && i%stride != 0 {
				continue
			}
			after := tl.StateAfter(i)
			want := keysOf(after)
			// a position is exact even inside a group of equal times
			s := st.StateAtSeq(dev, int64(i+1))
			if got := keysOf(s.Segments); s.Applied != int64(i+1) || !reflect.DeepEqual(got, want) {
				t.Fatalf("device %d position %d (%v): Applied %d, state differs\n got %+v\nwant %+v", dev, i+1, entryAt(tl, i), s.Applied, got, want)
			}
			sum := st.SummaryAtSeq(dev, int64(i+1))
			// a time cursor stands after every entry of its microsecond: it
			// agrees with the timeline at the end of a group
			if st.TimeBase(dev) == TimeSequence || i < 0 || i+1 == len(tl.Entries) || tl.Entries[i+1].TimeUS != tl.Entries[i].TimeUS {
				c := cursorAfter(st, dev, i)
				s := st.StateAt(dev, c)
				if s.Applied != int64(i+1) || s.Cursor != c {
					t.Fatalf("device %d entry %d: Applied %d", dev, i, s.Applied)
				}
				if got := keysOf(s.Segments); !reflect.DeepEqual(got, want) {
					t.Fatalf("device %d after entry %d (%v): state differs\n got %+v\nwant %+v", dev, i, entryAt(tl, i), got, want)
				}
				if ts := st.Summary(dev, c); ts.Applied != sum.Applied || ts.ActiveBytes != sum.ActiveBytes || ts.TotalFreeBytes != sum.TotalFreeBytes {
					t.Fatalf("device %d entry %d: time summary %+v, position summary %+v", dev, i, ts, sum)
				}
				if sum.Cursor != c {
					t.Fatalf("device %d entry %d: position cursor %d, time cursor %d", dev, i, sum.Cursor, c)
				}
			}
			wantAct := tl.ActiveAtStart
			if i >= 0 {
				wantAct = act[i]
			}
			if sum.ActiveBytes != wantAct {
				t.Fatalf("device %d after entry %d: active %d, want %d", dev, i, sum.ActiveBytes, wantAct)
			}
			var reserved int64
			for _, sg := range after {
				reserved += sg.TotalSize
			}
			if sum.ReservedBytes != reserved {
				t.Fatalf("device %d after entry %d: reserved %d, want %d", dev, i, sum.ReservedBytes, reserved)
			}
			if sum.AllocatedBytes > sum.ActiveBytes {
				t.Fatalf("device %d after entry %d: allocated %d > active %d", dev, i, sum.AllocatedBytes, sum.ActiveBytes)
			}
		}
	}
}

func entryAt(tl *replay.Timeline, i int) string {
	if i < 0 {
		return "start"
	}
	e := tl.Entries[i]
	return fmt.Sprintf("%s %#x %d", e.Action, e.Addr, e.Size)
}

func TestStoreAgreesWithTimelineGenerated(t *testing.T) {
	seeds := uint64(6)
	if testing.Short() { // make test-arm64 and the standalone pass: a sample
		seeds = 2
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		for _, withTime := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d-time%v", seed, withTime), func(t *testing.T) {
				checkAgreement(t, genCapture(seed, 700, withTime), 37)
			})
		}
	}
}

func TestStoreSeriesAndPeak(t *testing.T) {
	snap := genCapture(11, 5000, true)
	st := New(Options{CheckpointEvery: 100})
	if err := st.IngestSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	tl, _ := replay.NewTimeline(snap, 0)
	act := tl.ActiveSeries()
	first, last := st.Bounds(0)
	evs := st.Events(0, first, last+1, 0)
	if len(evs) != len(act) {
		t.Fatalf("events %d, want %d", len(evs), len(act))
	}
	for _, cols := range []int{1, 7, 200, 10000} {
		se := st.Series(0, first, last+1, cols)
		span := last + 1 - first
		for c := 0; c < cols; c++ {
			cs := first + span*int64(c)/int64(cols)
			ce := first + span*int64(c+1)/int64(cols)
			// brute force: value entering the column plus every value inside
			v := tl.ActiveAtStart
			for i, e := range evs {
				if e.Time < cs {
					v = act[i]
				}
			}
			mm := MinMax{v, v}
			for i, e := range evs {
				if e.Time >= cs && e.Time < ce {
					mm.Min, mm.Max = min(mm.Min, act[i]), max(mm.Max, act[i])
				}
			}
			if se.Active[c] != mm {
				t.Fatalf("cols %d col %d [%d,%d): %+v, want %+v", cols, c, cs, ce, se.Active[c], mm)
			}
		}
	}
	// peak agrees with a linear scan
	best, bi := tl.ActiveAtStart, -1
	for i, v := range act {
		if v > best {
			best, bi = v, i
		}
	}
	pc, pv := st.Peak(0)
	if pv != best || (bi >= 0 && pc != evs[bi].Time) {
		t.Fatalf("Peak = %d at %d, want %d at entry %d", pv, pc, best, bi)
	}
	sum := st.Summary(0, last)
	if sum.PeakActiveBytes != best || sum.Entries != int64(len(act)) || sum.Applied != sum.Entries {
		t.Fatalf("summary %+v", sum)
	}
	var ooms int
	for _, e := range tl.Entries {
		if e.Action == snapshot.ActionOOM {
			ooms++
		}
	}
	if sum.OOMs != ooms {
		t.Fatalf("OOMs %d, want %d", sum.OOMs, ooms)
	}
}

func TestStoreJumps(t *testing.T) {
	snap := genCapture(5, 3000, false)
	st := New(Options{})
	if err := st.IngestSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	tr := snap.DeviceTraces[0]
	for _, a := range []snapshot.Action{snapshot.ActionOOM, snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree} {
		// walk forward from the start and backward from the end
		var want []int64
		for i, e := range tr {
			if e.Action == a {
				want = append(want, int64(i))
			}
		}
		var got []int64
		for c, ok := int64(-1), true; ; {
			c, ok = st.Next(0, c, a)
			if !ok {
				break
			}
			got = append(got, c)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Next %s: %v, want %v", a, got, want)
		}
		got = got[:0]
		for c, ok := int64(len(tr)), true; ; {
			c, ok = st.Prev(0, c, a)
			if !ok {
				break
			}
			got = append([]int64{c}, got...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Prev %s: %v, want %v", a, got, want)
		}
	}
	if c, ok := st.NextEvent(0, 10); !ok || c != 11 {
		t.Fatalf("NextEvent(10) = %d %v", c, ok)
	}
	if c, ok := st.PrevEvent(0, 10); !ok || c != 9 {
		t.Fatalf("PrevEvent(10) = %d %v", c, ok)
	}
	if _, ok := st.PrevEvent(0, 0); ok {
		t.Fatal("PrevEvent before the first entry")
	}
	around := st.EventsAround(0, 10, 3, 2)
	if len(around) != 5 || around[0].Seq != 8 || around[4].Seq != 12 {
		t.Fatalf("EventsAround: %+v", around)
	}
	if ev := st.Events(0, 0, 1<<40, 0); len(ev) != len(tr) || ev[5].TraceEntry.Action != tr[5].Action || ev[5].Addr != tr[5].Addr {
		t.Fatalf("Events mismatch")
	}
}

// Live appends while readers query: results stay consistent and -race clean.
func TestStoreLiveConcurrent(t *testing.T) {
	snap := genCapture(3, 4000, true)
	tr := snap.DeviceTraces[0]
	// live: start from the state before the trace, then append the trace
	tl, _ := replay.NewTimeline(snap, 0)
	initial := &snapshot.Snapshot{Segments: tl.Initial, Stacks: snap.Stacks}
	st := New(Options{CheckpointEvery: 64})
	if err := st.StartLive(initial, []DeviceInfo{{ID: 0, Name: "sim", HBMTotal: 64 << 30}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, last := st.Bounds(0)
				s := st.StateAt(0, last)
				if s.Applied != 0 && s.Applied > st.Len(0) {
					t.Error("applied beyond length")
					return
				}
				st.Series(0, last-10000, last+1, 50)
				st.Summary(0, last)
				st.EventsAround(0, last, 5, 5)
			}
		}()
	}
	v0 := st.Version()
	for i := 0; i < len(tr); i += 97 {
		st.Append(0, tr[i:min(i+97, len(tr))])
	}
	close(stop)
	wg.Wait()
	if st.Version() <= v0 {
		t.Fatal("Version did not advance")
	}
	if di, ok := st.DeviceInfo(0); !ok || di.Name != "sim" {
		t.Fatalf("DeviceInfo = %+v %v", di, ok)
	}
	// the live log must agree with the capture's timeline (no overrides
	// live, so compare addresses, states and requested sizes)
	act := tl.ActiveSeries()
	for i := -1; i < len(tr); i += 13 {
		c := tl.Entries[max(i, 0)].TimeUS
		if i < 0 {
			c--
		}
		sum := st.Summary(0, c)
		want := tl.ActiveAtStart
		if i >= 0 {
			want = act[i]
		}
		if sum.ActiveBytes != want {
			t.Fatalf("live active after %d: %d, want %d", i, sum.ActiveBytes, want)
		}
		got, exp := st.StateAt(0, c), tl.StateAfter(i)
		if len(got.Segments) != len(exp) {
			t.Fatalf("live segments after %d: %d, want %d", i, len(got.Segments), len(exp))
		}
	}
}

func TestStoreGapAndRebase(t *testing.T) {
	st := New(Options{CheckpointEvery: 4})
	st.StartLive(nil, []DeviceInfo{{ID: 1}})
	e := func(a snapshot.Action, addr uint64, size, tm int64) snapshot.TraceEntry {
		return snapshot.TraceEntry{Action: a, Addr: addr, Size: size, TimeUS: tm}
	}
	st.Append(1, []snapshot.TraceEntry{
		e(snapshot.ActionSegmentAlloc, 0x1000, 4096, 10),
		e(snapshot.ActionAlloc, 0x1000, 100, 11),
	})
	st.NoteGap(1, 7)
	seg := snapshot.Segment{Device: 1, Address: 0x1000, TotalSize: 8192, Blocks: []snapshot.Block{
		{Address: 0x1000, Size: 512, RequestedSize: 500, State: snapshot.StateActiveAllocated},
		{Address: 0x1200, Size: 7680},
	}}
	before := st.SummaryAtSeq(1, 2)
	st.Rebase(1, []snapshot.Segment{seg})
	st.Append(1, []snapshot.TraceEntry{e(snapshot.ActionAlloc, 0x1400, 300, 12)})
	// the resync is an entry of its own: what came before keeps its figures
	if after := st.SummaryAtSeq(1, 2); after.ActiveBytes != before.ActiveBytes || after.ReservedBytes != before.ReservedBytes {
		t.Fatalf("entry 1 changed by the resync: %+v, was %+v", after, before)
	}
	if ev := st.EventsAroundSeq(1, 3, 1, 0); len(ev) != 1 || ev[0].Action != ActionResync || ev[0].Seq != 2 {
		t.Fatalf("resync marker: %+v", ev)
	}
	sum := st.Summary(1, 1<<62)
	if sum.Dropped != 7 || sum.ReservedBytes != 8192 || sum.ActiveBytes != 800 {
		t.Fatalf("summary after rebase: %+v", sum)
	}
	if g := st.Gaps(1); len(g) != 1 || g[0].At != 2 || g[0].Missed != 7 {
		t.Fatalf("gaps %+v", g)
	}
	s := st.StateAt(1, 1<<62)
	if len(s.Segments) != 1 || s.Segments[0].TotalSize != 8192 || len(s.Segments[0].Blocks) != 4 {
		t.Fatalf("state after rebase: %+v", s.Segments)
	}
	// before the gap the old state still answers
	if s := st.StateAt(1, 10); s.Segments[0].TotalSize != 4096 {
		t.Fatalf("state before rebase: %+v", s.Segments)
	}
}

func TestStoreOps(t *testing.T) {
	st := New(Options{})
	st.AppendOps([]Op{
		{Name: "ProfilerStep#1", StartUS: 0, EndUS: 1000, IsStep: true},
		{Name: "aten::linear", StartUS: 100, EndUS: 400},
	})
	st.AppendOps([]Op{ // arrives late and out of order
		{Name: "aten::matmul", StartUS: 150, EndUS: 300},
		{Name: "aten::add", StartUS: 500, EndUS: 520},
	})
	if o, ok := st.OpAt(200); !ok || o.Name != "aten::matmul" {
		t.Fatalf("OpAt(200) = %+v %v", o, ok)
	}
	if o, ok := st.OpAt(350); !ok || o.Name != "aten::linear" {
		t.Fatalf("OpAt(350) = %+v %v", o, ok)
	}
	if _, ok := st.OpAt(450); ok {
		t.Fatal("OpAt(450) found an op outside every non-step op")
	}
	// ends are included: an entry at an op's last microsecond is its
	if o, ok := st.OpAt(520); !ok || o.Name != "aten::add" {
		t.Fatalf("OpAt(520) = %+v %v, want aten::add (inclusive end)", o, ok)
	}
	if o, ok := st.OpAt(300); !ok || o.Name != "aten::matmul" {
		t.Fatalf("OpAt(300) = %+v %v, want aten::matmul (inclusive end of the inner op)", o, ok)
	}
	// a sibling starting where another ends takes the shared instant
	st.AppendOps([]Op{{Name: "aten::mul", StartUS: 520, EndUS: 530}})
	if o, ok := st.OpAt(520); !ok || o.Name != "aten::mul" {
		t.Fatalf("OpAt(520) = %+v %v, want aten::mul (later start)", o, ok)
	}
	got := st.Ops(390, 510)
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
	}
	if !reflect.DeepEqual(names, []string{"ProfilerStep#1", "aten::linear", "aten::add"}) {
		t.Fatalf("Ops = %v", names)
	}
}

func TestSeriesPyramid(t *testing.T) {
	var s series
	vals := make([]int64, 5000)
	for i := range vals {
		vals[i] = int64((i * 7919) % 1013)
		s.append(vals[i])
	}
	for _, r := range [][2]int{{0, 5000}, {3, 4}, {31, 33}, {32, 64}, {1000, 4097}, {17, 1057}} {
		mm, _ := s.extremes(r[0], r[1])
		want := MinMax{vals[r[0]], vals[r[0]]}
		for _, v := range vals[r[0]:r[1]] {
			want.Min, want.Max = min(want.Min, v), max(want.Max, v)
		}
		if mm != want {
			t.Fatalf("extremes%v = %+v, want %+v", r, mm, want)
		}
		fi := s.firstAtLeast(r[0], r[1], want.Max)
		if vals[fi] != want.Max {
			t.Fatalf("firstAtLeast%v = %d", r, fi)
		}
		for i := r[0]; i < fi; i++ {
			if vals[i] >= want.Max {
				t.Fatalf("firstAtLeast%v skipped %d", r, i)
			}
		}
	}
}

// TestStoreStateCallerOwned: StateAt and Summary at one cursor share the
// walk of the segment map, yet every State handed out is the caller's own
// — changing one changes neither a later answer nor Summary's — and
// Summary agrees with the state however the two are interleaved.
func TestStoreStateCallerOwned(t *testing.T) {
	st := New(Options{CheckpointEvery: 50})
	if err := st.IngestSnapshot(genCapture(5, 600, true)); err != nil {
		t.Fatal(err)
	}
	c := cursorAfter(st, 0, 321)
	a := st.StateAt(0, c)
	want := keysOf(a.Segments)
	wantGaps := append([]Gap(nil), a.Gaps...)
	if len(a.Segments) == 0 || len(a.Gaps) == 0 {
		t.Fatalf("fixture state too small: %d segments, %d gaps", len(a.Segments), len(a.Gaps))
	}
	for i := range a.Segments {
		a.Segments[i].TotalSize = -1
		for j := range a.Segments[i].Blocks {
			a.Segments[i].Blocks[j].Size = -1
		}
	}
	a.Segments[0].Blocks = append(a.Segments[0].Blocks, snapshot.Block{Address: 1})
	a.Gaps[0].Size = -1
	sum := st.Summary(0, c)
	b := st.StateAt(0, c)
	if got := keysOf(b.Segments); !reflect.DeepEqual(got, want) {
		t.Fatalf("state changed by the caller's edits:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(b.Gaps, wantGaps) {
		t.Fatalf("gaps changed by the caller's edits: %+v", b.Gaps)
	}
	var free, largest int64
	for _, g := range b.Gaps {
		free += g.Size
		largest = max(largest, g.Size)
	}
	if sum.Segments != len(b.Segments) || sum.TotalFreeBytes != free || sum.LargestFreeBlock != largest {
		t.Fatalf("summary %+v disagrees with the state (%d segments, free %d, largest %d)", sum, len(b.Segments), free, largest)
	}
	// Two States at one cursor share no memory.
	if &a.Segments[0] == &b.Segments[0] || &a.Segments[1].Blocks[0] == &b.Segments[1].Blocks[0] {
		t.Fatal("states share memory")
	}
	// Summary alone (its own walk) and Summary after StateAt (the cached
	// walk) agree with the state at every entry, stepping both ways.
	for _, order := range []string{"summary first", "state first", "backwards"} {
		for k := 0; k < 600; k++ {
			i := k
			if order == "backwards" {
				i = 599 - k
			}
			c := cursorAfter(st, 0, i)
			var sum Summary
			var s State
			if order == "state first" {
				s, sum = st.StateAt(0, c), st.Summary(0, c)
			} else {
				sum, s = st.Summary(0, c), st.StateAt(0, c)
			}
			var free, largest int64
			for _, g := range s.Gaps {
				free += g.Size
				largest = max(largest, g.Size)
			}
			if sum.Segments != len(s.Segments) || sum.TotalFreeBytes != free || sum.LargestFreeBlock != largest || sum.Applied != s.Applied {
				t.Fatalf("%s, entry %d: summary %+v disagrees with the state (%d segments, free %d, largest %d)", order, i, sum, len(s.Segments), free, largest)
			}
		}
	}
}

// fixtureAssignment2 is a real capture whose trace holds entries sharing
// one microsecond (1,452 pairs and 3 triples).
func fixtureAssignment2(t testing.TB) string {
	return fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
}

// sameTimeGroup returns the first index of the first run of exactly n
// entries with one time.
func sameTimeGroup(tr []snapshot.TraceEntry, n int) int {
	for i := 0; i < len(tr); {
		j := i
		for j < len(tr) && tr[j].TimeUS == tr[i].TimeUS {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// TestStoreStepsInsideOneMicrosecond: on a real capture, positions step
// through every entry of a three-entry microsecond one at a time, each
// matching replay's oracle, while a time cursor can only stand after all
// three.
func TestStoreStepsInsideOneMicrosecond(t *testing.T) {
	c, err := replay.DecodeFile(fixtureAssignment2(t), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := New(Options{})
	if err := st.IngestSnapshot(c.Snapshot); err != nil {
		t.Fatal(err)
	}
	tr := c.Snapshot.DeviceTraces[0]
	g := sameTimeGroup(tr, 3)
	if g <= 0 {
		t.Fatal("fixture has no three-entry microsecond")
	}
	tl, err := replay.NewTimeline(c.Snapshot, 0)
	if err != nil {
		t.Fatal(err)
	}
	tm := tr[g].TimeUS
	if n := st.Applied(0, tm); n != int64(g+3) {
		t.Fatalf("a time cursor at the group applies %d entries, want %d", n, g+3)
	}
	if n := st.Applied(0, tm-1); n != int64(g) {
		t.Fatalf("just before the group: %d entries, want %d", n, g)
	}
	prev := keysOf(st.StateAtSeq(0, int64(g)).Segments)
	for k := 0; k < 3; k++ {
		n := int64(g + k + 1)
		s := st.StateAtSeq(0, n)
		got := keysOf(s.Segments)
		if want := keysOf(tl.StateAfter(g + k)); !reflect.DeepEqual(got, want) {
			t.Fatalf("position %d (%v): state differs from the oracle", n, entryAt(tl, g+k))
		}
		if reflect.DeepEqual(got, prev) {
			t.Fatalf("position %d (%v): state did not change", n, entryAt(tl, g+k))
		}
		prev = got
		sum := st.SummaryAtSeq(0, n)
		if s.Applied != n || sum.Applied != n || s.Cursor != tm || sum.Cursor != tm {
			t.Fatalf("position %d: state applied %d cursor %d, summary applied %d cursor %d", n, s.Applied, s.Cursor, sum.Applied, sum.Cursor)
		}
		if want := tl.ActiveSeries()[g+k]; sum.ActiveBytes != want {
			t.Fatalf("position %d: active %d, want %d", n, sum.ActiveBytes, want)
		}
		evs := st.EventsAroundSeq(0, n, 1, 1)
		if len(evs) != 2 || evs[0].Seq != n-1 || evs[1].Seq != n {
			t.Fatalf("position %d: events around %+v", n, evs)
		}
	}
	// positions outside the log are clamped
	if s := st.StateAtSeq(0, -5); s.Applied != 0 {
		t.Fatalf("negative position applied %d", s.Applied)
	}
	if s := st.SummaryAtSeq(0, 1<<40); s.Applied != int64(len(tr)) {
		t.Fatalf("position past the end applied %d", s.Applied)
	}
}

// TestLiveAtSeqMatchesReplay: the Store's live allocations at every
// position are replay/explain's (sizes, stacks, births) on a real capture.
func TestLiveAtSeqMatchesReplay(t *testing.T) {
	for _, name := range []string{"cuda-2026-assignment2-memory_snapshot.pickle", "cuda-2.0-flexgen-oom_snapshot.pickle"} {
		c, err := replay.DecodeFile(fixture.Path(t, "snapshots/"+name), replay.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st := New(Options{CheckpointEvery: 64})
		if err := st.IngestSnapshot(c.Snapshot); err != nil {
			t.Fatal(err)
		}
		tl, err := replay.NewTimeline(c.Snapshot, 0)
		if err != nil {
			t.Fatal(err)
		}
		w := explain.NewWalker(tl)
		for n := int64(0); n <= st.Len(0); n += 97 {
			w.AdvanceTo(int(n) - 1)
			want := w.Live()
			got := st.LiveAtSeq(0, n)
			if len(got) != len(want) {
				t.Fatalf("%s after %d entries: %d live, replay %d", name, n, len(got), len(want))
			}
			for i := range got {
				g, r := got[i], want[i]
				if g.Addr != r.Addr || g.Size != r.Size || g.Born != r.Born || g.BornTime != r.BornTime ||
					!slices.Equal(st.Stack(g.Frames), c.Snapshot.Stack(r.Frames)) {
					t.Fatalf("%s after %d entries, allocation %d: store %+v, replay %+v", name, n, i, g, r)
				}
			}
		}
	}
}

// TestHistoryStacksReachTheState: in a torch 2.0 capture the blocks carry
// their stacks in history[].frames only; the segment map's live blocks get
// them (460 of the 463 blocks have one).
func TestHistoryStacksReachTheState(t *testing.T) {
	c, err := replay.DecodeFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"), replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st := New(Options{})
	if err := st.IngestSnapshot(c.Snapshot); err != nil {
		t.Fatal(err)
	}
	with, live := 0, 0
	for _, s := range st.StateAtSeq(0, st.Len(0)).Segments {
		for _, b := range s.Blocks {
			if b.State.Active() {
				live++
				if len(st.Stack(b.Frames)) > 0 {
					with++
				}
			}
		}
	}
	if live == 0 || with != live {
		t.Errorf("%d of %d live blocks have a stack", with, live)
	}
}

// TestStoreOpsSince: a reader applying OpsSince's answers to its own copy
// always holds what Ops returns, whether it reads after every append, every
// few, or falls more than the edit ring behind; late, out-of-order ops
// included.
func TestStoreOpsSince(t *testing.T) {
	st := New(Options{})
	r := rand.New(rand.NewPCG(7, 7))
	type reader struct {
		every int
		ver   uint64
		ops   []Op
	}
	readers := []*reader{{every: 1}, {every: 5}, {every: 100}}
	next := int64(0)
	for call := 1; call <= 400; call++ {
		var batch []Op
		for range 1 + r.IntN(4) {
			start := next
			if r.IntN(4) == 0 {
				start -= r.Int64N(50) // late
			}
			batch = append(batch, Op{Name: "op", StartUS: start, EndUS: start + r.Int64N(30), Seq: int64(call)})
			next += 10
		}
		st.AppendOps(batch)
		want := st.Ops(math.MinInt64, math.MaxInt64)
		for _, rd := range readers {
			if call%rd.every != 0 {
				continue
			}
			ops, from, ver := st.OpsSince(rd.ver)
			if from > len(rd.ops) {
				t.Fatalf("call %d: from %d beyond the reader's %d ops", call, from, len(rd.ops))
			}
			rd.ops = append(rd.ops[:from], ops...)
			rd.ver = ver
			if !reflect.DeepEqual(rd.ops, want) {
				t.Fatalf("call %d, reader every %d: %d ops, want %d", call, rd.every, len(rd.ops), len(want))
			}
		}
	}
	if ops, from, _ := st.OpsSince(readers[0].ver); len(ops) != 0 || from != len(readers[0].ops) {
		t.Fatalf("an up-to-date reader got %d ops from %d", len(ops), from)
	}
}
