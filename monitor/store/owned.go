package store

import (
	"runtime"
	"sort"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/tiling"
)

// IngestOwned is IngestSnapshot for a snapshot its caller gives up to the
// Store: once a device's records are stored, its trace is dropped from
// snap (snap.DeviceTraces[dev] becomes nil) before the rest of the index
// (series, action indexes, segment-map checkpoints) is built from the
// records, so the decoded trace and the whole index are never held
// together, nor both kept afterwards. Trace gives a device's trace back,
// entry for entry as the snapshot held it. snap's other fields stay as
// they were; its Devices no longer lists a device that only its trace
// named.
func (s *Store) IngestOwned(snap *snapshot.Snapshot) error { return s.ingest(snap, nil, true) }

// Trace returns device's trace as snap, a capture IngestOwned took, held
// it, entry for entry; false when the Store's log of device is not the one
// ingested from snap (never ingested so, or replaced since). Built afresh
// on each call (72 bytes an entry), except where the Store kept snap's own
// trace, which is then returned shared: it must not be modified.
func (s *Store) Trace(snap *snapshot.Snapshot, device int) ([]snapshot.TraceEntry, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil || snap == nil || d.owner != snap {
		return nil, false
	}
	if d.keep != nil {
		return d.keep, true
	}
	return d.traceOf(d.recs.lo(), d.recs.Len()), true
}

// entryOf is the trace entry record r gives back: all of it but a time
// that went backwards (records keep the time never going backwards), an
// oom entry's address (its record holds the free bytes there) and the
// free bytes of another entry.
func (d *devLog) entryOf(r *rec) snapshot.TraceEntry {
	a := &d.attrs.list[r.attr]
	e := snapshot.TraceEntry{
		Action: r.action, Addr: r.addr, Size: r.size, Stream: a.stream, Frames: r.frames,
		PoolID: a.pool, HasPoolID: a.hasPool, CompileContext: a.compileContext, UserMetadata: a.userMetadata,
	}
	if r.action == snapshot.ActionOOM {
		e.Addr, e.DeviceFree = 0, int64(r.addr)
	}
	if d.base == TimeEpochUS {
		e.TimeUS = r.time
	}
	return e
}

// inexactEntries are the entries of an owned capture that entryOf does not
// give back, by position.
type inexactEntries struct {
	seq     []int64 // ascending
	entries []snapshot.TraceEntry
}

// maxInexact is the share of a trace's entries (1/maxInexact) beyond which
// the Store keeps the trace itself rather than its inexact entries.
const maxInexact = 16

// noteInexact records entry seq of trace, which its record does not give
// back; past maxInexact of them the Store keeps trace instead.
func (d *devLog) noteInexact(seq int64, e *snapshot.TraceEntry, trace []snapshot.TraceEntry) {
	if len(d.inexact.seq) >= 64+len(trace)/maxInexact {
		d.keep, d.inexact = trace, inexactEntries{}
		return
	}
	d.inexact.add(seq, e)
}

// add records entry seq, after every position held.
func (x *inexactEntries) add(seq int64, e *snapshot.TraceEntry) {
	x.seq = append(x.seq, seq)
	x.entries = append(x.entries, *e)
}

// fixCursor walks inexactEntries in position order.
type fixCursor struct {
	ix *inexactEntries
	i  int
}

func (x *inexactEntries) from(seq int64) fixCursor {
	return fixCursor{x, sort.Search(len(x.seq), func(i int) bool { return x.seq[i] >= seq })}
}

// at reports whether position seq (the walk's next) is an inexact entry.
func (c *fixCursor) at(seq int64) bool { return c.i < len(c.ix.seq) && c.ix.seq[c.i] == seq }

// next returns the inexact entry at the cursor and moves past it.
func (c *fixCursor) next() snapshot.TraceEntry {
	c.i++
	return c.ix.entries[c.i-1]
}

// releaseCollect is the trace length from which dropping it runs the
// collector at once: the index built next then reuses its memory instead
// of growing the heap past both.
const releaseCollect = 1 << 16

// collectBefore runs the collector before an owned capture of at least
// releaseCollect entries is indexed: what decoding it left behind is freed
// before the records join the trace, the most the ingest holds at once.
func collectBefore(snap *snapshot.Snapshot) {
	var n int
	for _, tr := range snap.DeviceTraces {
		n += len(tr)
	}
	if n >= releaseCollect {
		runtime.GC()
	}
}

// release drops device dev's trace from snap (IngestOwned).
func (d *devLog) release(snap *snapshot.Snapshot, dev int) {
	d.owner = snap
	if dev >= len(snap.DeviceTraces) || len(snap.DeviceTraces[dev]) == 0 {
		return
	}
	n := len(snap.DeviceTraces[dev])
	snap.DeviceTraces[dev] = nil
	if n >= releaseCollect {
		runtime.GC()
	}
}

// rollRecords is rollCapture from the stored records (the trace dropped);
// cut, if not nil, is called after each checkpoint is added.
func (d *devLog) rollRecords(k int, cut func()) {
	n := d.recs.Len()
	d.allocated.v.reserve(n)
	next := d.checkpointGap(k)
	fix := d.inexact.from(0)
	var seq int64
	d.recs.each(0, n, func(p []recBody, acts []snapshot.Action) {
		for i := range p {
			r := p[i].with(acts[i])
			e := d.entryOf(&r)
			if fix.at(seq) {
				e = fix.next()
			}
			v := tiling.EntryOf(&e)
			d.pending += d.head.Apply(&v, seq, d.id, &d.ov)
			d.allocated.bulk(d.pending)
			if seq+1 >= next {
				d.cps = append(d.cps, d.dumpPacked(seq+1))
				next = seq + 1 + d.checkpointGap(k)
				if cut != nil {
					cut()
				}
			}
			seq++
		}
	})
}
