package watch

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/replay"
)

// A streamed load (Stream) ends with the Store and capture a DropTrace
// load makes: the same events, summaries and ops, and WithTrace gives the
// decoded trace back.
func TestLoadStreamSameAsDropTrace(t *testing.T) {
	path := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	dropped, streamed := store.New(store.Options{}), store.New(store.Options{})
	ld, err := Load(context.Background(), path, dropped, LoadOptions{DropTrace: true})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := Load(context.Background(), path, streamed, LoadOptions{DropTrace: true, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if !streamed.Settled() {
		t.Fatal("not settled once loaded")
	}
	if !reflect.DeepEqual(dropped.Devices(), streamed.Devices()) {
		t.Fatalf("devices %v, streamed %v", dropped.Devices(), streamed.Devices())
	}
	for _, dev := range dropped.Devices() {
		n := dropped.Len(dev)
		if a, b := dropped.EventsAroundSeq(dev, 0, 0, int(n)), streamed.EventsAroundSeq(dev, 0, 0, int(n)); !reflect.DeepEqual(a, b) {
			t.Fatalf("device %d: events differ", dev)
		}
		for _, i := range []int64{0, n / 3, n / 2, n} {
			if a, b := dropped.SummaryAtSeq(dev, i), streamed.SummaryAtSeq(dev, i); !reflect.DeepEqual(a, b) {
				t.Fatalf("device %d at %d: summary differs", dev, i)
			}
		}
	}
	if a, b := dropped.Ops(-1<<62, 1<<62), streamed.Ops(-1<<62, 1<<62); !reflect.DeepEqual(a, b) {
		t.Fatalf("ops %d, streamed %d", len(a), len(b))
	}
	wd, ws := WithTrace(ld.Capture, dropped), WithTrace(ls.Capture, streamed)
	if !reflect.DeepEqual(wd.Snapshot.DeviceTraces, ws.Snapshot.DeviceTraces) || !replay.SameModel(wd.Snapshot, ws.Snapshot) {
		t.Fatal("WithTrace of the streamed load differs")
	}
}

// While a large file streams in, progress reports carry the bytes and the
// entries so far, and the Store already holds them (not Settled); a file
// cut mid-trace fails as a DropTrace load does and leaves the Store empty.
func TestLoadStreamProgressAndErrors(t *testing.T) {
	const base, mib = 0x7f0000000000, 1 << 20
	snap := &snapshot.Snapshot{Segments: []snapshot.Segment{{Address: base, TotalSize: 64 * mib, IsLarge: true,
		Blocks: []snapshot.Block{{Address: base, Size: 64 * mib, State: snapshot.StateInactive}}}}}
	var tr []snapshot.TraceEntry
	for i := range 6 << 16 {
		a := uint64(base + (i/2%64)*mib)
		act := snapshot.ActionAlloc
		if i%2 == 1 {
			act = snapshot.ActionFreeCompleted
		}
		tr = append(tr, snapshot.TraceEntry{Action: act, Addr: a, Size: mib, TimeUS: int64(1_700_000_000_000_000 + i)})
	}
	snap.DeviceTraces = [][]snapshot.TraceEntry{tr}
	dir := t.TempDir()
	path := filepath.Join(dir, "big.pickle")
	if err := replay.WriteFile(path, snap, replay.WritePickle, replay.ExportDict); err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{})
	var mu sync.Mutex
	var seen []store.LoadProgress
	var early bool // a report while decoding found entries in the Store
	_, err := Load(context.Background(), path, st, LoadOptions{DropTrace: true, Stream: true, Report: func(p store.LoadProgress) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, p)
		if p.Stage == "decoding" && p.Entries > 0 && st.Len(0) > 0 && !st.Settled() {
			early = true
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !early {
		t.Fatalf("no report found the Store filling while decoding: %+v", seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].BytesDone < seen[i-1].BytesDone || seen[i].Entries < seen[i-1].Entries {
			t.Fatalf("progress went back: %+v then %+v", seen[i-1], seen[i])
		}
	}
	if last := seen[len(seen)-1]; last.Entries != int64(len(tr)) || last.BytesDone != last.BytesTotal || st.Len(0) != int64(len(tr)) {
		t.Fatalf("last report %+v, %d entries stored", last, st.Len(0))
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.pickle")
	if err := os.WriteFile(cut, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, want := Load(context.Background(), cut, store.New(store.Options{}), LoadOptions{DropTrace: true})
	st = store.New(store.Options{})
	_, err = Load(context.Background(), cut, st, LoadOptions{DropTrace: true, Stream: true})
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("streamed error %v, want %v", err, want)
	}
	if len(st.Devices()) != 0 || !st.Settled() {
		t.Fatalf("after the failed load: devices %v, settled %v", st.Devices(), st.Settled())
	}
}
