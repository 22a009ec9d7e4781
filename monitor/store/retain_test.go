package store

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/replay"
)

func TestParseRetention(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Retention
		err  string
	}{
		{"all", Retention{}, ""},
		{"2000000", Retention{Entries: 2000000}, ""},
		{"4096", Retention{Entries: 4096}, ""},
		{"30m", Retention{Span: 30 * time.Minute}, ""},
		{"1h30m", Retention{Span: 90 * time.Minute}, ""},
		{" 2h ", Retention{Span: 2 * time.Hour}, ""},
		{"", Retention{}, "empty value"},
		{"4095", Retention{}, "at least 4096 entries"},
		{"0", Retention{}, "at least 4096 entries"},
		{"-5", Retention{}, "want a number of entries"},
		{"2M", Retention{}, "want a number of entries"},
		{"30", Retention{}, "at least 4096 entries"},
		{"500ms", Retention{}, "at least 1s"},
		{"99999999999999999999", Retention{}, "too large"},
		{"1e6", Retention{}, "want a number of entries"},
		{"ALL", Retention{}, "want a number of entries"},
	} {
		got, err := ParseRetention(c.in)
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("ParseRetention(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("ParseRetention(%q) error %v, want one saying %q", c.in, err, c.err)
		}
	}
	for _, r := range []Retention{{}, {Entries: 5000}, {Span: 30 * time.Minute}} {
		if back, err := ParseRetention(r.String()); err != nil || back != r {
			t.Errorf("%+v → %q → %+v, %v", r, r.String(), back, err)
		}
	}
}

// liveFrom starts a Store live from the state before snap's trace.
func liveFrom(t *testing.T, snap *snapshot.Snapshot, opts Options) (*Store, *replay.Timeline) {
	t.Helper()
	tl, err := replay.NewTimeline(snap, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := New(opts)
	if err := st.StartLive(&snapshot.Snapshot{Segments: tl.Initial, Stacks: snap.Stacks}, []DeviceInfo{{ID: 0}}); err != nil {
		t.Fatal(err)
	}
	return st, tl
}

func TestRetentionThinsDetailKeepsSeriesAndPeaks(t *testing.T) {
	snap := genCapture(11, 40000, true)
	tr := snap.DeviceTraces[0]
	full, _ := liveFrom(t, snap, Options{CheckpointEvery: 256})
	ret, _ := liveFrom(t, snap, Options{CheckpointEvery: 256, Retain: Retention{Entries: 8192}})
	for i := 0; i < len(tr); i += 97 {
		full.Append(0, tr[i:min(i+97, len(tr))])
		ret.Append(0, tr[i:min(i+97, len(tr))])
	}
	n := ret.Len(0)
	info := ret.Retained(0)
	if n != int64(len(tr)) || info.Thinned == 0 || n-info.Thinned < 8192 || n-info.Thinned >= 8192+chunkLen {
		t.Fatalf("len %d, thinned %d: want 8192…12287 entries held", n, info.Thinned)
	}
	if h := ret.Held(); h != n-info.Thinned {
		t.Fatalf("Held %d, want %d", h, n-info.Thinned)
	}
	_, last := full.Bounds(0)
	if info.DetailFrom != cursorAfter(full, 0, int(info.Thinned)-1) {
		t.Fatalf("DetailFrom %d, want the time of entry %d", info.DetailFrom, info.Thinned-1)
	}
	// the newest state and every figure at it agree, peaks exact over the session
	want, got := full.Summary(0, last), ret.Summary(0, last)
	if got.ThinnedEntries != info.Thinned || got.DetailFrom != info.DetailFrom || got.Thinned {
		t.Fatalf("retention in the summary: %+v", got)
	}
	got.ThinnedEntries, got.DetailFrom = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("summary at the newest entry\n got  %+v\n want %+v", got, want)
	}
	// the session's peak lies in the thinned part: still exact
	pk, pv := full.Peak(0)
	if rk, rv := ret.Peak(0); rk != pk || rv != pv {
		t.Fatalf("Peak %d@%d, want %d@%d", rv, rk, pv, pk)
	}
	if pk >= info.DetailFrom {
		t.Logf("note: the peak (%d) is inside the window", pk)
	}
	// every position in the window answers as without retention
	for p := info.Thinned; p <= n; p += 509 {
		if g, w := ret.SummaryAtSeq(0, p), full.SummaryAtSeq(0, p); g.ActiveBytes != w.ActiveBytes || g.ReservedBytes != w.ReservedBytes ||
			g.AllocatedBytes != w.AllocatedBytes || g.PeakActiveBytes != w.PeakActiveBytes || g.PeakReservedBytes != w.PeakReservedBytes || g.Segments != w.Segments {
			t.Fatalf("position %d: %+v, want %+v", p, g, w)
		}
		if g, w := ret.StateAtSeq(0, p), full.StateAtSeq(0, p); !reflect.DeepEqual(keysOf(g.Segments), keysOf(w.Segments)) || g.Thinned {
			t.Fatalf("segment map at position %d differs", p)
		}
	}
	// before the window: a clear "thinned" answer, no map, no entries
	early := cursorAfter(full, 0, 100)
	if s := ret.StateAt(0, early); !s.Thinned || len(s.Segments) != 0 || s.Applied >= info.Thinned {
		t.Fatalf("StateAt before the window: %+v", s)
	}
	if s := ret.Summary(0, early); !s.Thinned || s.ActiveBytes != 0 || s.ThinnedEntries != info.Thinned {
		t.Fatalf("Summary before the window: %+v", s)
	}
	if s := ret.StateAtSeq(0, 10); !s.Thinned {
		t.Fatalf("StateAtSeq before the window: %+v", s)
	}
	if ev := ret.EventsAroundSeq(0, 10, 5, 5); len(ev) != 5 || ev[0].Seq != info.Thinned {
		t.Fatalf("EventsAroundSeq clamps to the window: %+v", ev)
	}
	if ev := ret.EventsAround(0, early, 5, 5); len(ev) != 5 || ev[0].Seq != info.Thinned {
		t.Fatalf("EventsAround clamps to the window: %+v", ev)
	}
	if ev := ret.Events(0, -1<<62, info.DetailFrom, 0); len(ev) != 0 {
		t.Fatalf("Events before the window: %d", len(ev))
	}
	if _, ok := ret.PrevEvent(0, info.DetailFrom); ok {
		t.Fatal("PrevEvent went into the thinned part")
	}
	if c, ok := ret.NextEvent(0, early); !ok || c < info.DetailFrom {
		t.Fatalf("NextEvent from before the window: %d %v", c, ok)
	}
	// the series covers the whole session: an envelope of the full one
	// before the window, the same inside it
	first, _ := full.Bounds(0)
	if f, _ := ret.Bounds(0); f != first {
		t.Fatalf("Bounds first %d, want %d", f, first)
	}
	for _, cols := range []int{1, 7, 200, 3000} {
		gs, ws := ret.Series(0, first, last+1, cols), full.Series(0, first, last+1, cols)
		for c := 0; c < cols; c++ {
			for k, pair := range [][2][]MinMax{{gs.Active, ws.Active}, {gs.Allocated, ws.Allocated}, {gs.Reserved, ws.Reserved}} {
				g, w := pair[0][c], pair[1][c]
				if g.Min > w.Min || g.Max < w.Max {
					t.Fatalf("cols %d, column %d, series %d: %+v does not cover %+v", cols, c, k, g, w)
				}
				ce := first + (last+1-first)*int64(c)/int64(cols) // the column's start
				if ce > info.DetailFrom && g != w {
					t.Fatalf("cols %d, column %d (inside the window), series %d: %+v, want %+v", cols, c, k, g, w)
				}
			}
		}
		if cols == 1 && (gs.Active[0] != ws.Active[0] || gs.Reserved[0] != ws.Reserved[0]) {
			t.Fatalf("whole-session column: %+v / %+v, want %+v / %+v", gs.Active[0], gs.Reserved[0], ws.Active[0], ws.Reserved[0])
		}
	}
}

func TestRetentionBySpan(t *testing.T) {
	st := New(Options{Retain: Retention{Span: 10 * time.Second}})
	st.StartLive(nil, []DeviceInfo{{ID: 0}})
	ref := New(Options{})
	ref.StartLive(nil, []DeviceInfo{{ID: 0}})
	const t0 = 1_700_000_000_000_000
	var batch []snapshot.TraceEntry
	for i := 0; i < 100_000; i++ { // 1 ms apart: 100 s
		a := snapshot.ActionAlloc
		if i%2 == 1 {
			a = snapshot.ActionFreeCompleted
		}
		batch = append(batch, snapshot.TraceEntry{Action: a, Addr: 0x1000, Size: int64(512 * (1 + i%7)), TimeUS: t0 + int64(i)*1000})
		if len(batch) == 1000 {
			st.Append(0, batch)
			ref.Append(0, batch)
			batch = batch[:0]
		}
	}
	info := st.Retained(0)
	_, last := st.Bounds(0)
	if info.Thinned == 0 {
		t.Fatalf("thinned %d", info.Thinned)
	}
	// every entry of the last 10 s is held; nothing older than a chunk before it
	if info.DetailFrom >= last-10_000_000 {
		t.Fatalf("detail from %d: entries of the last 10 s dropped (last %d)", info.DetailFrom, last)
	}
	if info.DetailFrom < last-10_000_000-(chunkLen+DefaultCheckpointEvery)*1000 {
		t.Fatalf("detail from %d: more than a chunk and a checkpoint interval older than 10 s kept (last %d)", info.DetailFrom, last)
	}
	// the peak is long gone from the detail, and exact
	s, w := st.Summary(0, last), ref.Summary(0, last)
	if s.PeakActiveBytes != w.PeakActiveBytes || s.PeakActiveTime != w.PeakActiveTime || s.PeakReservedBytes != w.PeakReservedBytes ||
		w.PeakActiveTime >= info.DetailFrom {
		t.Fatalf("peak %d at %d, want %d at %d (detail from %d)", s.PeakActiveBytes, s.PeakActiveTime, w.PeakActiveBytes, w.PeakActiveTime, info.DetailFrom)
	}
}

// TestRetentionBounded appends far past the window and checks that what
// the Store holds stops growing: chunks, checkpoints, overrides, buckets.
func TestRetentionBounded(t *testing.T) {
	st := New(Options{Retain: Retention{Entries: 10_000}})
	st.StartLive(nil, []DeviceInfo{{ID: 0}})
	const t0 = 1_700_000_000_000_000
	var peak int64
	held := func() (int, int, int, int, int) {
		st.mu.RLock()
		defer st.mu.RUnlock()
		d := st.devs[0]
		return len(d.recs.chunks), len(d.cps), len(d.sizes.chunks), len(d.thin.buckets), len(d.active.levels[0].mins.chunks)
	}
	var at1 [5]int
	ents := make([]snapshot.TraceEntry, 0, 4000)
	sizes := make([]int64, 0, 4000)
	for round := 0; round < 1200; round++ { // 4.8 M entries
		ents, sizes = ents[:0], sizes[:0]
		for i := 0; i < 2000; i++ {
			s := int64(100 + (round*7+i)%5000)
			if round == 600 && i == 5 {
				s = 1 << 30 // the session's peak, thinned long before the end
				peak = s
			}
			tm := t0 + int64(round*2000+i)
			ents = append(ents, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: 0x1000, Size: s, TimeUS: tm},
				snapshot.TraceEntry{Action: snapshot.ActionFreeCompleted, Addr: 0x1000, Size: s, TimeUS: tm})
			sizes = append(sizes, (s+511)&^511, 0)
		}
		st.AppendSized(0, ents, sizes)
		if round == 300 {
			a, b, c, d, e := held()
			at1 = [5]int{a, b, c, d, e}
		}
	}
	a, b, c, d, e := held()
	now := [5]int{a, b, c, d, e}
	for i, what := range []string{"log chunks", "checkpoints", "block-size chunks", "", "pyramid chunks"} {
		if what != "" && now[i] > at1[i]+1 {
			t.Errorf("%s grew from %d to %d", what, at1[i], now[i])
		}
	}
	if now[3] > maxThinBuckets {
		t.Errorf("%d thinned buckets", now[3])
	}
	_, last := st.Bounds(0)
	if s := st.Summary(0, last); s.PeakActiveBytes != peak || s.Entries != 4_800_000 {
		t.Fatalf("peak %d over %d entries, want %d over 4800000", s.PeakActiveBytes, s.Entries, peak)
	}
	first, _ := st.Bounds(0)
	if sr := st.Series(0, first, last+1, 100); sr.Active[50].Max != peak {
		t.Fatalf("the thinned series lost the peak: column 50 %+v", sr.Active[50])
	}
}

func TestRetentionDropsOldOps(t *testing.T) {
	st := New(Options{Retain: Retention{Entries: 4096}})
	st.StartLive(nil, []DeviceInfo{{ID: 0}})
	const t0 = 1_700_000_000_000_000
	var ver uint64
	var ops []Op
	for round := 0; round < 40; round++ {
		var batch []Op
		var ents []snapshot.TraceEntry
		for i := 0; i < 1000; i++ {
			tm := t0 + int64(round*1000+i)*10
			batch = append(batch, Op{Name: "aten::add", StartUS: tm, EndUS: tm + 5, Step: -1, Seq: -1})
			ents = append(ents, snapshot.TraceEntry{Action: snapshot.ActionAlloc, Addr: uint64(0x1000 + i), Size: 1, TimeUS: tm})
		}
		st.AppendOps(batch)
		st.Append(0, ents)
		got, from, now := st.OpsSince(ver)
		ops = append(ops[:from], got...)
		ver = now
	}
	info := st.Retained(0)
	if len(ops) >= 40_000 || len(ops) == 0 {
		t.Fatalf("%d ops held after thinning %d entries", len(ops), info.Thinned)
	}
	if ops[0].EndUS >= info.DetailFrom && len(ops) > 2*(40_000-int(info.Thinned)) {
		t.Fatalf("ops: %d held, the first ending at %d (detail from %d)", len(ops), ops[0].EndUS, info.DetailFrom)
	}
	// what OpsSince handed out is exactly what the Store holds
	if all := st.Ops(-1<<62, 1<<62); !reflect.DeepEqual(all, ops) {
		t.Fatalf("OpsSince reader holds %d ops, the Store %d", len(ops), len(all))
	}
	_, last := st.Bounds(0)
	if op, ok := st.OpAt(last); !ok || op.StartUS > last {
		t.Fatalf("OpAt newest: %+v %v", op, ok)
	}
}

// TestRetentionOpsOnly: a Store holding only ops (a watched profiler
// directory) keeps the newest ones.
func TestRetentionOpsOnly(t *testing.T) {
	st := New(Options{Retain: Retention{Entries: 5000}})
	for round := 0; round < 30; round++ {
		var batch []Op
		for i := 0; i < 1000; i++ {
			tm := int64(round*1000+i) * 10
			batch = append(batch, Op{Name: "aten::mm", StartUS: tm, EndUS: tm + 5, Step: -1, Seq: -1})
		}
		st.AppendOps(batch)
	}
	all := st.Ops(-1<<62, 1<<62)
	if len(all) < 5000 || len(all) > 10000 || all[len(all)-1].StartUS != 299990 {
		t.Fatalf("%d ops held, the last at %d", len(all), all[len(all)-1].StartUS)
	}
	span := New(Options{Retain: Retention{Span: time.Second}})
	for round := 0; round < 30; round++ {
		var batch []Op
		for i := 0; i < 1000; i++ {
			tm := int64(round*1000+i) * 100 // 3 s in all
			batch = append(batch, Op{Name: "aten::mm", StartUS: tm, EndUS: tm + 5, Step: -1, Seq: -1})
		}
		span.AppendOps(batch)
	}
	if all := span.Ops(-1<<62, 1<<62); all[0].EndUS < 2_999_905-2*1_000_000 || len(all) < 10000 {
		t.Fatalf("%d ops held from %d", len(all), all[0].StartUS)
	}
}

// TestRestartKeepsHistory: a restart marker is an entry of its own; the
// entries before it keep their figures and segment maps byte for byte.
func TestRestartKeepsHistory(t *testing.T) {
	snap := genCapture(5, 3000, true)
	tr := snap.DeviceTraces[0]
	st, _ := liveFrom(t, snap, Options{CheckpointEvery: 64})
	st.Append(0, tr[:2000])
	var before []Summary
	var maps [][]segKey
	for p := int64(0); p <= 2000; p += 37 {
		before = append(before, st.SummaryAtSeq(0, p))
		maps = append(maps, keysOf(st.StateAtSeq(0, p).Segments))
	}
	seg := snapshot.Segment{Device: 0, Address: 0x10000000, TotalSize: 1 << 20, Blocks: []snapshot.Block{
		{Address: 0x10000000, Size: 1 << 19, RequestedSize: 1 << 19, State: snapshot.StateActiveAllocated},
		{Address: 0x10080000, Size: 1 << 19},
	}}
	st.Restart(0, []snapshot.Segment{seg}, 4242)
	_, lastOld := st.Bounds(0)
	st.Append(0, []snapshot.TraceEntry{{Action: snapshot.ActionAlloc, Addr: 0x10080000, Size: 4096, TimeUS: lastOld}})
	for i, p := 0, int64(0); p <= 2000; i, p = i+1, p+37 {
		g := st.SummaryAtSeq(0, p)
		if g.Entries != 2002 {
			t.Fatalf("entries %d, want 2002 (the marker and one)", g.Entries)
		}
		g.Entries, g.LastTime = before[i].Entries, before[i].LastTime
		if !reflect.DeepEqual(g, before[i]) {
			t.Fatalf("position %d changed by the restart:\n got  %+v\n want %+v", p, g, before[i])
		}
		if g := keysOf(st.StateAtSeq(0, p).Segments); !reflect.DeepEqual(g, maps[i]) {
			t.Fatalf("segment map at position %d changed by the restart", p)
		}
	}
	at, ok := st.Next(0, -1<<62, ActionRestart)
	ev := st.EventsAroundSeq(0, 2001, 1, 0)
	if !ok || len(ev) != 1 || ev[0].Action != ActionRestart || ev[0].Addr != 4242 || ev[0].Time != at || ev[0].Seq != 2000 {
		t.Fatalf("restart marker: at %d %v, %+v", at, ok, ev)
	}
	if s := st.SummaryAtSeq(0, 2001); s.ActiveBytes != 1<<19 || s.ReservedBytes != 1<<20 || s.Segments != 1 {
		t.Fatalf("state at the marker: %+v", s)
	}
	if s := st.SummaryAtSeq(0, 2002); s.ActiveBytes != 1<<19+4096 {
		t.Fatalf("after the marker: %+v", s)
	}
	if streams := st.Streams(0); len(streams) != len(new(Store).Streams(0))+len(streamsOf(tr[:2000])) {
		t.Fatalf("the marker added a stream: %v", streams)
	}
}

func streamsOf(tr []snapshot.TraceEntry) map[uint64]bool {
	m := map[uint64]bool{}
	for _, e := range tr {
		m[e.Stream] = true
	}
	return m
}

// TestRetentionRecycledChunksReadBack: a window that turns over many times
// reuses the chunks it thins (log, series, indexes, sizes), and every
// entry held reads back exactly as appended — the records, the three byte
// series and the per-action indexes agree with a Store keeping everything,
// at every position of the window, after every batch; nothing of a
// recycled chunk's old entries shows.
func TestRetentionRecycledChunksReadBack(t *testing.T) {
	// the live benchmark's pattern: alloc / free_requested / free_completed
	// over 256 slots of one segment, a few entries a µs
	live := wiretest.NewLive()
	t0 := int64(1_750_000_000_000_000)
	tr := []snapshot.TraceEntry{live.Segment(t0)}
	for i := 1; i < 100_000; i++ {
		tr = append(tr, live.Next(t0+int64(i/3)))
	}
	full, ret := New(Options{CheckpointEvery: 256}), New(Options{CheckpointEvery: 256, Retain: Retention{Entries: 8192}})
	for _, st := range []*Store{full, ret} {
		if err := st.StartLive(nil, []DeviceInfo{{ID: 0}}); err != nil {
			t.Fatal(err)
		}
	}
	full.Append(0, tr[:1])
	ret.Append(0, tr[:1])
	tr = tr[1:]
	fd, rd := full.devs[0], ret.devs[0]
	seen := map[*recBody]bool{} // first element of every chunk the log has had
	reused := 0
	for i := 0; i < len(tr); i += 1013 {
		batch := tr[i:min(i+1013, len(tr))]
		full.Append(0, batch)
		ret.Append(0, batch)
		for _, ch := range rd.recs.chunks {
			if p := &ch[:1][0]; !seen[p] {
				seen[p] = true
			} else if cap(ch) == chunkLen && len(ch) < chunkLen {
				reused++ // a chunk seen before, being filled again
			}
		}
		n := int64(rd.recs.Len())
		for j := rd.off; j < n; j++ {
			if rd.recs.at(int(j)) != fd.recs.at(int(j)) {
				t.Fatalf("after %d entries: record %d is %+v, want %+v", n, j, rd.recs.at(int(j)), fd.recs.at(int(j)))
			}
			if rd.active.at(int(j)) != fd.active.at(int(j)) || rd.allocated.at(int(j)) != fd.allocated.at(int(j)) || rd.reserved.at(int(j)) != fd.reserved.at(int(j)) {
				t.Fatalf("after %d entries: the byte series differ at %d", n, j)
			}
		}
		for a := range rd.byAction {
			r, f := &rd.byAction[a], &fd.byAction[a]
			if r.Len() != f.Len() {
				t.Fatalf("action %d: %d indexed, want %d", a, r.Len(), f.Len())
			}
			for k := r.lo(); k < r.Len(); k++ {
				if r.at(k) != f.at(k) {
					t.Fatalf("action %d: index %d is %d, want %d", a, k, r.at(k), f.at(k))
				}
			}
		}
		if i%(8*1013) != 0 {
			continue
		}
		if ev, want := ret.EventsAroundSeq(0, rd.off, 0, int(n-rd.off)), full.EventsAroundSeq(0, rd.off, 0, int(n-rd.off)); !reflect.DeepEqual(ev, want) {
			t.Fatalf("after %d entries: the window's events differ", n)
		}
	}
	if info := ret.Retained(0); info.Thinned < int64(len(tr))-8192-3*chunkLen {
		t.Fatalf("thinned %d of %d", info.Thinned, len(tr))
	}
	if reused == 0 {
		t.Fatal("no thinned chunk was reused")
	}
	if len(seen) > 8192/chunkLen+4+maxSpare {
		t.Fatalf("the log had %d distinct chunks for a window of %d entries: thinned chunks were not reused", len(seen), 8192)
	}
}
