package wire

import (
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// FuzzStoreLive feeds arbitrary entries (as a hostile producer could send
// them) into a live Store and runs every query: no panic, no hang, and the
// invariants hold.
func FuzzStoreLive(f *testing.F) {
	e := &enc{texts: testTexts}
	encodeEntries(e, 0, 0, testEntries(200, 1))
	f.Add(e.b[5:])
	f.Add([]byte{0, 0, 3, 4, 0, 0, 0, 0, 0, 0, 6, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x7f, 0, 0, 0, 0, 7, 1, 1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) > 1<<12 {
			return // small K below makes checkpoints quadratic in the input
		}
		_, _, ents, err := decodeEntries(p, nil)
		if err != nil && len(ents) == 0 {
			return
		}
		st := store.New(store.Options{CheckpointEvery: 3})
		st.StartLive(nil, nil)
		st.Append(0, ents)
		st.NoteGap(0, 2)
		st.Rebase(0, nil)
		st.Append(0, ents)
		first, last := st.Bounds(0)
		for _, c := range []int64{first - 1, first, (first + last) / 2, last, last + 1} {
			s := st.StateAt(0, c)
			if s.Applied < 0 || s.Applied > st.Len(0) {
				t.Fatalf("applied %d of %d", s.Applied, st.Len(0))
			}
			sum := st.Summary(0, c)
			if sum.Fragmentation < 0 || sum.Fragmentation > 1 {
				t.Fatalf("fragmentation %v", sum.Fragmentation)
			}
			st.EventsAround(0, c, 3, 3)
			st.Next(0, c, snapshot.ActionOOM)
			st.Prev(0, c, snapshot.ActionSegmentAlloc)
		}
		st.Series(0, first, last+1, 17)
		st.Peak(0)
	})
}
