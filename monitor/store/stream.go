package store

import (
	"runtime"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/tiling"
)

// OwnedStream is IngestOwned for a capture still being decoded: it is the
// replay.TraceSink of the decode (replay.Options.Trace), and each batch of
// entries the decoder hands over is appended to a device log at once, as a
// live producer's are (one writer, Version bumps), so the Store holds a
// usable, growing prefix of the trace while the file loads and every query
// answers over it.
//
// The state before the first entry needs the whole trace (the undo walk
// from the final segments), and so do the overrides that give blocks
// surviving to the end the final state's attributes. Until Finish the
// prefix is therefore indexed from a provisional start: no block alive,
// active and reserved bytes counted from 0, no overrides, requested sizes
// unrounded, and each trace list is shown as the device of its number
// (lists are numbered in the order their first entries come: device 0 is
// list 0 unless an earlier device's trace is empty). Settled reports false
// meanwhile. Finish settles: it reconstructs the start from the records
// (replay.NewTimelineFunc), settles the segment map (checkpoints,
// pending-free bytes) from the provisional roll or, where the trace has
// segment entries, rolls it forward again from the start (settleRoll),
// adds the start values to the series,
// and installs the logs under their devices: the Store is then exactly
// what IngestOwned makes of the same snapshot, records, series and action
// indexes built while the file was read. A failed decode calls Abort,
// which removes what was streamed: nothing half-loaded stays.
type OwnedStream struct {
	s       *Store
	logs    []*devLog // by trace-list number
	entries atomic.Int64
	done    bool
	// appendHold's buffers: the pending-free bytes after each entry of a
	// hold, the checkpoints it cut
	pend []int64
	cuts []*checkpoint
}

// provisionalSparse spaces a provisional log's checkpoints once its trace
// has a segment entry: four times further apart than a settled one's, as
// settling rolls the segment map again then (settleRoll) and they serve
// only the loaded prefix (a seek there rolls forward over at most four
// times as many entries, a few ms). Until then they are cut as a settled
// log's, since settling makes the settled ones from them.
const provisionalSparse = 4

// StreamOwned starts a streamed ingest (OwnedStream); the Store is not
// Settled until its Finish or Abort. Batches come from one goroutine, and
// Finish or Abort after the last batch.
func (s *Store) StreamOwned() *OwnedStream {
	s.unsettled.Add(1)
	return &OwnedStream{s: s}
}

// Settled reports whether every figure the Store gives is final: false
// while a streamed capture loads (OwnedStream), whose prefix is indexed
// from a provisional start state.
func (s *Store) Settled() bool { return s.unsettled.Load() == 0 }

// Entries is the number of entries streamed so far (safe from any goroutine).
func (o *OwnedStream) Entries() int64 { return o.entries.Load() }

// TraceBatch appends a batch of trace list list's entries to its log
// (replay.TraceSink).
func (o *OwnedStream) TraceBatch(list int, e []snapshot.TraceEntry, t *replay.TraceTables) {
	if o.done || len(e) == 0 || list < 0 {
		return
	}
	s := o.s
	for len(o.logs) <= list {
		o.logs = append(o.logs, nil)
	}
	hasTime := slices.ContainsFunc(e, func(e snapshot.TraceEntry) bool { return e.TimeUS != 0 })
	s.mu.Lock()
	if t != nil {
		if n := len(t.Stacks); n > len(s.stacks) {
			s.stacks = t.Stacks[:n:n] // the decoder appends past n: an InternStack copies
			s.stackIdx = nil
		}
		if t.Actions != nil && t.Actions.Len() > 0 {
			s.actions = t.Actions
		}
		if t.Texts != nil {
			s.texts = t.Texts
		}
	}
	d := o.logs[list]
	if d == nil {
		d = newDevLog(list, TimeSequence)
		d.packs = !s.retain.Enabled()
		d.cps = []*checkpoint{d.head.Freeze(0)}
		o.logs[list] = d
		s.putDev(d)
	}
	if hasTime && d.base == TimeSequence {
		// as scanCapture decides: one entry with a time makes the log's
		// times epoch µs; the entries before had none (0, never going
		// backwards)
		d.base = TimeEpochUS
		d.recs.each(0, d.recs.Len(), func(p []recBody, _ []snapshot.Action) {
			for i := range p {
				p[i].time = 0
			}
		})
	}
	s.mu.Unlock()
	n := len(e)
	for len(e) > 0 {
		k := min(len(e), streamHold)
		o.appendHold(d, e[:k])
		e = e[k:]
	}
	o.entries.Add(int64(n))
	s.changed()
}

// appendHold appends entries to the provisional log d: appendEntries, but
// with the segment map rolled outside the write lock. Queries never read
// the head (they roll from a checkpoint over the records), so only the
// records, series and action indexes, then the checkpoints cut, are
// written under it: a frame's queries wait for those alone, never for a
// roll or a checkpoint's copy of every live block, which take most of an
// append (issue #29, "input never waits on data").
func (o *OwnedStream) appendHold(d *devLog, entries []snapshot.TraceEntry) {
	s := o.s
	n0 := int64(d.recs.Len())
	// the roll: the pending-free bytes after each entry, and the
	// checkpoints due, dumped whole (packed once their records are in)
	pend := o.pend[:0]
	cuts := o.cuts[:0]
	next := d.cps[len(d.cps)-1].At + d.checkpointGap(s.k)
	for i := range entries {
		seq := n0 + int64(i)
		v := tiling.EntryOf(&entries[i])
		d.pending += d.head.Apply(&v, seq, d.id, &d.ov)
		pend = append(pend, d.pending)
		if seq+1 >= next {
			cuts = append(cuts, d.head.DumpInto(seq+1, d.scratch)) // the buffer a packed checkpoint left
			d.scratch = nil
			next = seq + 1 + d.checkpointGap(s.k)
		}
	}
	o.pend, o.cuts = pend, cuts
	s.mu.Lock()
	var last int64
	act, res := d.initActive, d.initReserv
	if n0 > 0 {
		last = d.recs.ptr(int(n0 - 1)).time
		act, res = d.active.at(int(n0-1)), d.reserved.at(int(n0-1))
	}
	for i := range entries {
		e := &entries[i]
		seq := n0 + int64(i)
		r := d.recordOf(e, seq, &last)
		d.recs.append(r)
		if d.entryOf(&r) != *e { // what Trace cannot give back from the record
			d.inexact.add(seq, e)
		}
		act += replay.ActiveDelta(e)
		res += replay.ReservedDelta(e)
		d.batchA = append(d.batchA, act)
		d.batchL = append(d.batchL, act-pend[i])
		d.batchR = append(d.batchR, res)
		d.byAction[e.Action].append(seq)
	}
	d.flushSeries()
	s.mu.Unlock()
	if len(cuts) == 0 {
		return
	}
	// pack the checkpoints (their blocks' records are in now), then
	// publish them
	packed := make([]*packedBlocks, len(cuts))
	for i, cp := range cuts {
		if d.packs {
			if packed[i] = d.packBlocks(cp.Blocks); packed[i] != nil {
				d.scratch = cp.Blocks
			}
		}
	}
	s.mu.Lock()
	for i, cp := range cuts {
		if p := packed[i]; p != nil {
			d.lastMu.Lock()
			d.packedInto(cp, p)
			d.lastMu.Unlock()
		}
		d.cps = append(d.cps, cp)
	}
	if d.sparse == 0 && d.hasSegmentEntries() {
		// settling will roll the segment map again (settleRoll): the
		// provisional checkpoints are only for the loaded prefix
		d.sparse = provisionalSparse
	}
	s.mu.Unlock()
	clear(cuts)
	o.cuts = cuts[:0]
}

// streamHold is the most entries TraceBatch appends under one hold of the
// write lock. The decoder's batches come back to back while a file loads,
// and a frame of the UI makes many short queries, each of which waits for
// the hold in progress: 512 entries (about 0.1 ms on an idle core) keep a
// frame's waits short however long the load runs (issue #29, "input never
// waits on data").
const streamHold = 512

// Abort removes the logs streamed so far (the decode failed or was
// cancelled) and ends the stream: the Store holds nothing of the capture
// (a log it held under a list's number before the stream was replaced by
// it, and is gone too; npumon replay streams into an empty Store). Safe to
// call more than once.
func (o *OwnedStream) Abort() {
	if o.done {
		return
	}
	o.done = true
	s := o.s
	s.mu.Lock()
	o.drop()
	s.mu.Unlock()
	s.unsettled.Add(-1)
	s.changed()
}

// drop removes the streamed logs still installed; the caller holds the
// write lock.
func (o *OwnedStream) drop() {
	s := o.s
	for _, d := range o.logs {
		if d != nil && s.devs[d.id] == d {
			delete(s.devs, d.id)
			s.ids = slices.DeleteFunc(s.ids, func(id int) bool { return id == d.id })
		}
	}
}

// Finish settles the stream once the decode is done: snap is the decoded
// capture (its traces empty) and lists its TraceLists (per device, the
// list that was its trace, -1 for none). The devices' logs are then
// exactly IngestOwned's of the snapshot with its traces, owned by snap
// (Trace gives each back). On error (as IngestOwned's) the streamed logs
// are removed.
func (o *OwnedStream) Finish(snap *snapshot.Snapshot, lists []int) error {
	if o.done {
		return nil
	}
	s := o.s
	if o.Entries() >= releaseCollect {
		runtime.GC() // what decoding left is freed before the roll allocates
	}
	listOf := func(dev int) *devLog {
		if dev < len(lists) && lists[dev] >= 0 && lists[dev] < len(o.logs) {
			return o.logs[lists[dev]]
		}
		return nil
	}
	devices := snap.Devices()
	for dev := range lists {
		if listOf(dev) != nil && !slices.Contains(devices, dev) {
			devices = append(devices, dev)
		}
	}
	slices.Sort(devices)
	type settled struct {
		d, from *devLog // from: the streamed log whose series d takes over
	}
	out := make([]settled, len(devices))
	taken := map[*devLog]bool{}
	for i, dev := range devices {
		src := listOf(dev)
		var err error
		switch {
		case src == nil: // no trace: as IngestOwned (it has none to drop)
			out[i].d, err = s.buildCapture(snap, dev, nil, true)
		case taken[src]: // a list two devices share: the second indexes a copy
			for len(snap.DeviceTraces) <= dev {
				snap.DeviceTraces = append(snap.DeviceTraces, nil)
			}
			snap.DeviceTraces[dev] = src.traceOf(0, src.recs.Len())
			out[i].d, err = s.buildCapture(snap, dev, nil, true)
		default:
			taken[src] = true
			out[i].d, err = s.settle(snap, dev, src)
			out[i].from = src
		}
		if err != nil {
			o.Abort()
			return err
		}
	}
	s.mu.Lock()
	o.done = true
	o.drop()
	if len(snap.Stacks) > 1 { // as ingest
		s.stacks = append([]snapshot.Stack{nil}, snap.Stacks[1:]...)
		s.stackIdx = nil
	}
	if snap.Actions != nil {
		s.actions = snap.Actions
	}
	if snap.Texts != nil {
		s.texts = snap.Texts
	}
	s.annotations = append([]snapshot.Annotation(nil), snap.ExternalAnnotations...)
	for _, b := range out {
		if src := b.from; src != nil {
			// the relative series and action indexes the stream built are
			// the ones buildCapture builds; only the start values change
			b.d.active, b.d.reserved, b.d.byAction = src.active, src.reserved, src.byAction
			if b.d.fromProv {
				b.d.allocated = src.allocated
				b.d.finishProvisional()
			} else {
				b.d.finishSeries(nil)
			}
		}
		s.putDev(b.d)
	}
	s.mu.Unlock()
	s.unsettled.Add(-1)
	s.changed()
	if o.logs = nil; o.Entries() >= releaseCollect {
		// the provisional logs' own parts (their allocated series,
		// pyramids, checkpoints) are garbage now: freed before the first
		// settled frame allocates
		runtime.GC()
	}
	return nil
}

// settle is buildCapture for device dev of a capture whose records
// streamed into src: its overrides and start from the records (the trace
// read back one entry at a time), and the segment-map roll from that
// start. The series and action indexes are src's, taken over under the
// write lock (Finish).
func (s *Store) settle(snap *snapshot.Snapshot, dev int, src *devLog) (*devLog, error) {
	n := src.recs.Len()
	d := newDevLog(dev, src.base)
	d.recs, d.attrs, d.inexact = src.recs, src.attrs, src.inexact
	d.packs = !s.retain.Enabled()
	d.ov = captureOverrides(snap, dev, n, func(i int) (snapshot.Action, uint64) {
		// an oom's record holds DeviceFree, but overrides skip ooms
		return d.recs.action(i), d.recs.ptr(i).addr
	})
	rd := entryReader{d: d}
	tl, err := replay.NewTimelineFunc(snap, dev, n, rd.read)
	if err != nil {
		return nil, err
	}
	if n >= releaseCollect {
		runtime.GC() // the timeline's address set, before the roll allocates
	}
	d.startAt(tl)
	s.mu.Lock()
	src.ov = d.ov
	s.mu.Unlock()
	s.settleRoll(src, d)
	d.owner = snap
	return d, nil
}

// settledTo puts the checkpoints the settling roll of d made so far in
// place of src's provisional ones up to the last of them (src is what
// queries read until Finish installs d): the segment map is settled up to
// there, and the provisional checkpoints it replaces are freed as it
// goes, so the two sets are never held whole together.
func (s *Store) settledTo(src, d *devLog) {
	at := d.cps[len(d.cps)-1].At
	s.mu.Lock()
	defer s.mu.Unlock()
	rest := src.cps[sort.Search(len(src.cps), func(i int) bool { return src.cps[i].At > at }):]
	src.lastMu.Lock()
	for _, cp := range src.cps[:len(src.cps)-len(rest)] {
		delete(src.packed, cp)
	}
	if p := d.packed[d.cps[len(d.cps)-1]]; p != nil { // the one cut since the last call
		if src.packed == nil {
			src.packed = map[*checkpoint]*packedBlocks{}
		}
		src.packed[d.cps[len(d.cps)-1]] = p
	}
	src.cps = append(slices.Clip(d.cps), rest...)
	src.last, src.measured, src.unpackedFrom, src.unpacked = nil, measured{}, nil, nil
	src.lastMu.Unlock()
}

// entryAt is entry seq of an owned capture, as Trace gives it back.
func (d *devLog) entryAt(seq int64) snapshot.TraceEntry {
	if fix := d.inexact.from(seq); fix.at(seq) {
		return fix.next()
	}
	r := d.recs.at(int(seq))
	return d.entryOf(&r)
}

// entryReader reads an owned capture's entries as entryAt gives them, for
// walks that go one entry at a time forward or backward (the timeline's):
// the inexact entries are found by moving from the last one read, not by
// a search each time.
type entryReader struct {
	d *devLog
	j int // inexact.seq[j-1] < the last position read <= inexact.seq[j]
}

func (rd *entryReader) read(i int, e *snapshot.TraceEntry) {
	d, seq := rd.d, int64(i)
	if x := d.inexact.seq; len(x) > 0 {
		for rd.j < len(x) && x[rd.j] < seq {
			rd.j++
		}
		for rd.j > 0 && x[rd.j-1] >= seq {
			rd.j--
		}
		if rd.j < len(x) && x[rd.j] == seq {
			*e = d.inexact.entries[rd.j]
			return
		}
	}
	r := d.recs.at(i)
	*e = d.entryOf(&r)
}

// traceOf is entries [lo, hi) of an owned capture, as Trace gives them.
func (d *devLog) traceOf(lo, hi int) []snapshot.TraceEntry {
	out := make([]snapshot.TraceEntry, 0, hi-lo)
	fix := d.inexact.from(int64(lo))
	seq := int64(lo)
	d.recs.each(lo, hi, func(p []recBody, acts []snapshot.Action) {
		for i := range p {
			r := p[i].with(acts[i])
			e := d.entryOf(&r)
			if fix.at(seq) {
				e = fix.next()
			}
			out = append(out, e)
			seq++
		}
	})
	return out
}

// OwnedAnnotationOps is AnnotationOps of a capture the Store owns (an
// OwnedStream's or IngestOwned's, whose traces snap no longer holds): the
// user_defined entries, the only ones it reads, are read back from the
// logs snap's traces became.
func (s *Store) OwnedAnnotationOps(snap *snapshot.Snapshot) []Op {
	cp := *snap
	cp.DeviceTraces = slices.Clone(snap.DeviceTraces)
	devices := snap.Devices()
	s.mu.RLock()
	for _, dev := range s.ids {
		d := s.devs[dev]
		if d.owner != snap || d.recs.Len() == 0 {
			continue
		}
		if !slices.Contains(devices, dev) {
			devices = append(devices, dev)
		}
		for len(cp.DeviceTraces) <= dev {
			cp.DeviceTraces = append(cp.DeviceTraces, nil)
		}
		var tr []snapshot.TraceEntry
		ix := &d.byAction[snapshot.ActionUserDefined]
		for i := ix.lo(); i < ix.Len(); i++ {
			tr = append(tr, d.entryAt(ix.at(i)))
		}
		cp.DeviceTraces[dev] = tr
	}
	s.mu.RUnlock()
	slices.Sort(devices)
	return annotationOps(&cp, devices)
}
