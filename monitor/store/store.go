package store

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
)

// Options tune a Store.
type Options struct {
	// CheckpointEvery is K, the number of entries between segment-map
	// checkpoints: a seek costs one checkpoint restore plus at most K
	// entries. Default 2048. While more than K blocks are live the gap is
	// the number of live blocks instead (checkpointGap).
	CheckpointEvery int
	// Now is the clock marker entries take their time from (nil: time.Now).
	Now func() time.Time
	// Retain bounds what live appends keep in full detail (retain.go); the
	// zero value keeps everything. A capture ingested whole is not thinned.
	Retain Retention
}

// DefaultCheckpointEvery is the K a zero Options gets.
const DefaultCheckpointEvery = 2048

// DeviceInfo describes a live device (from the wire handshake or an
// in-process allocator).
type DeviceInfo struct {
	ID       int
	Name     string
	HBMTotal int64
	HBMUsed  int64
	Streams  int
}

// GapRecord marks entries a live producer dropped before this position.
type GapRecord struct {
	At     int64 // number of entries in the log when the gap was noted
	Missed int64 // 0: an unknown number (the producer's own source lost them)
}

// Store is the time-indexed model every view queries: per device a log of
// trace entries with a byte series per entry, segment-map checkpoints every
// K entries, and the profiler ops. It is safe for concurrent use by one
// writer and many readers; every query result is owned by the caller.
type Store struct {
	mu   sync.RWMutex
	k    int
	ver  atomic.Uint64
	devs map[int]*devLog
	ids  []int // device ids, ascending

	stacks   []snapshot.Stack
	stackIdx map[string]snapshot.StackID // built lazily by InternStack
	// actions names the entries' actions beyond the known ones: the
	// ingested capture's table, or the one live sources decode into.
	actions *snapshot.ActionTable
	// texts holds the strings entries name by TextID, like actions.
	texts *snapshot.TextTable

	ops      []Op          // sorted by StartUS
	opMaxEnd []int64       // prefix max of EndUS over ops
	opIdx    oprange.Index // OpAt's search tree over ops
	opsVer   uint64        // AppendOps calls so far
	opsEdits [opsEditRing]opsEdit

	annotations []snapshot.Annotation
	info        map[int]DeviceInfo

	// indexed counts entries the ingests of captures have indexed, in
	// steps of indexStep (Indexed: a load's progress while it indexes).
	indexed atomic.Int64
	// unsettled counts streamed captures still loading (stream.go): their
	// figures are provisional until they settle (Settled).
	unsettled atomic.Int32

	retain     Retention
	opsThinned int64 // ops dropped by the retention window
	now        func() time.Time
}

// indexStep is how many entries a capture's ingest indexes between two
// additions to Store.indexed.
const indexStep = 1 << 16

// attr holds the rarely varying fields of an entry, interned per Store.
type attr struct {
	stream         uint64
	pool           snapshot.PoolID
	hasPool        bool
	compileContext snapshot.TextID // of the Store's Texts
	userMetadata   snapshot.TextID
}

// devLog is one device's log.
type devLog struct {
	id   int
	base TimeBase
	recs records

	// values right after each entry; init* before entry 0. Reserved
	// bytes change only at segment entries and markers: a step function.
	active, allocated                     series
	reserved                              steps
	initActive, initAllocated, initReserv int64
	pending                               int64 // head: pending-free bytes
	// a live batch's values, appended to the series at its end (appendBatch)
	batchA, batchL, batchR []int64

	cps      []*checkpoint // cps[0].At == 0; sorted by at
	head     *segState
	ov       overrides
	byAction [256]positions // seqs per action
	attrs    *attrTable
	gaps     []GapRecord
	missed   int64

	indexed *atomic.Int64 // the Store's count of entries indexed by ingests; nil for live logs
	sparse  int           // > 1: checkpoints this many times further apart (a streamed capture's provisional log)
	// fromProv: settled from a streamed log's provisional roll, its series
	// still to finish (finishProvisional) with pendFix
	fromProv bool
	pendFix  []pendFix

	// A capture ingested by IngestOwned (owned.go): owner is the snapshot
	// it came from, inexact the entries its records do not give back
	// exactly, or, when there are too many of those, keep the trace itself.
	owner   *snapshot.Snapshot
	inexact inexactEntries
	keep    []snapshot.TraceEntry
	// packs: a capture's checkpoints are packed (packed.go); packed holds
	// their blocks, scratch the buffer they are dumped into; unpacked is
	// unpackedFrom with its blocks (packed and these two guarded by lastMu
	// once the log is queried).
	packs                  bool
	packed                 map[*checkpoint]*packedBlocks
	scratch                []tiling.Block
	unpackedFrom, unpacked *checkpoint

	// retention (retain.go): entries before off are thinned; firstTime is
	// entry 0's time once it is gone
	off       int64
	firstTime int64
	thin      thinned
	sizes     chunked[int64] // live block sizes per entry (overrides.sizes)

	// ivHi, for a capture whose times were recovered, is per entry -1 where
	// its time is exact, else its interval's upper bound (0: open); nil
	// when every time is exact (Event.Interval).
	ivHi []int64

	lastMu sync.Mutex
	last   *checkpoint // the last state a query rolled to (cursor stepping)

	catMu sync.Mutex      // guards cats, catsN (built under the read lock)
	cats  *category.Table // Store.Categories, for catsN entries
	catsN int
	// measured is Summary's view of the last state a query saw (StateAt
	// and Summary at one cursor walk it once)
	measured measured
}

// New returns an empty Store.
func New(opts Options) *Store {
	k := opts.CheckpointEvery
	if k <= 0 {
		k = DefaultCheckpointEvery
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{
		now:     now,
		retain:  opts.Retain,
		k:       k,
		devs:    map[int]*devLog{},
		stacks:  []snapshot.Stack{nil},
		info:    map[int]DeviceInfo{},
		actions: snapshot.NewActionTable(),
		texts:   snapshot.NewTextTable(),
	}
}

// Texts returns the table of the strings this Store's entries name by
// TextID (compile context, user metadata); live sources intern theirs in it.
func (s *Store) Texts() *snapshot.TextTable {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.texts
}

// Actions returns the table that names this Store's actions beyond the
// known ones; live sources register the names they decode in it.
func (s *Store) Actions() *snapshot.ActionTable {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.actions
}

// ActionName returns the serialized name of an action of this Store.
func (s *Store) ActionName(a snapshot.Action) string { return s.Actions().Name(a) }

// Indexed is the number of entries the ingests of captures have indexed
// so far, counted in steps (a loader's progress while a capture indexes).
func (s *Store) Indexed() int64 { return s.indexed.Load() }

func (s *Store) changed() { s.ver.Add(1) }

// Version increases whenever the Store's data changes (a redraw trigger).
func (s *Store) Version() uint64 { return s.ver.Load() }

// ---- ingest ----

// IngestSnapshot loads a decoded capture: per device, the state before the
// first entry is reconstructed once (replay.NewTimeline), then the trace is
// indexed forward. It replaces the logs of the devices the snapshot holds.
// A snapshot with a stack table replaces the Store's table (its ids are
// used as they are); one without keeps it (ids already from InternStack).
// The snapshot must not be modified afterwards.
func (s *Store) IngestSnapshot(snap *snapshot.Snapshot) error { return s.IngestStated(snap, nil) }

// IngestStated is IngestSnapshot where stated, if not nil, holds per device
// the byte totals the source states itself (a profiler's memory records),
// which replace those the trace yields.
func (s *Store) IngestStated(snap *snapshot.Snapshot, stated []DeviceTotals) error {
	return s.ingest(snap, stated, false)
}

// ingest is IngestStated; with own the snapshot's traces are the Store's
// to drop (IngestOwned).
func (s *Store) ingest(snap *snapshot.Snapshot, stated []DeviceTotals, own bool) error {
	if snap == nil {
		return fmt.Errorf("monitor: ingest: no snapshot")
	}
	type built struct {
		d   *devLog
		err error
	}
	devices := snap.Devices()
	if own {
		collectBefore(snap)
	}
	logs := make([]built, len(devices))
	// Devices are independent; build them outside the lock.
	var wg sync.WaitGroup
	for i, dev := range devices {
		wg.Add(1)
		go func() {
			defer crash.Recover()
			defer wg.Done()
			var st *DeviceTotals
			if dev < len(stated) && stated[dev].OK && len(stated[dev].After) > 0 {
				st = &stated[dev]
			}
			d, err := s.buildCapture(snap, dev, st, own)
			logs[i] = built{d, err}
		}()
	}
	wg.Wait()
	for _, b := range logs {
		if b.err != nil {
			return b.err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(snap.Stacks) > 1 {
		s.stacks = append([]snapshot.Stack{nil}, snap.Stacks[1:]...)
		s.stackIdx = nil
	} // else: ids are already this Store's (live sources intern via InternStack)
	if snap.Actions != nil {
		s.actions = snap.Actions // codes are the capture's, like its stack ids
	}
	if snap.Texts != nil {
		s.texts = snap.Texts // so are text ids
	}
	s.annotations = append([]snapshot.Annotation(nil), snap.ExternalAnnotations...)
	for _, b := range logs {
		s.putDev(b.d) // checkpoints are sorted by the first query that needs each
	}
	s.changed()
	return nil
}

// buildCapture indexes one device of a capture; stated, if not nil, gives
// its byte series. With own, the device's trace is dropped from snap once
// its records are stored (IngestOwned).
func (s *Store) buildCapture(snap *snapshot.Snapshot, dev int, stated *DeviceTotals, own bool) (*devLog, error) {
	var entries []snapshot.TraceEntry
	if dev < len(snap.DeviceTraces) {
		entries = snap.DeviceTraces[dev]
	}
	// Two steps of two goroutines each. While the trace is needed: one
	// scans it (action counts, time base, the overrides the roll needs) and
	// stores the records; the other reconstructs the initial state
	// (replay). Then, from the records alone (the trace may be gone): one
	// stores the action indexes and the active and reserved series
	// relative to the start, which only the initial state fixes (added
	// once both are done); the other rolls the segment map forward from
	// the initial state (checkpoints, pending-free bytes).
	d := newDevLog(dev, TimeSequence)
	d.indexed = &s.indexed
	d.packs = !s.retain.Enabled()
	var pre prepass
	scanned, stored := make(chan struct{}), make(chan struct{})
	go func() {
		defer crash.Recover()
		defer close(stored)
		pre = scanCapture(snap, dev, entries)
		if pre.hasTime {
			d.base = TimeEpochUS
		}
		close(scanned)
		d.storeRecords(entries, own)
		if pre.hasTime {
			d.ivHi = intervalHi(snap, dev, entries)
		}
	}()
	tl, err := replay.NewTimeline(snap, dev)
	<-scanned
	if err != nil {
		<-stored
		return nil, fmt.Errorf("monitor: ingest device %d: %w", dev, err)
	}
	d.ov = pre.ov
	d.startAt(tl)
	tl = nil
	<-stored
	if own && d.keep == nil {
		entries = nil
		d.release(snap, dev)
	} else if own {
		d.owner = snap
	}
	indexed := make(chan struct{})
	go func() {
		defer crash.Recover()
		defer close(indexed)
		d.storeSeries(&pre.counts)
	}()
	if entries != nil {
		d.rollCapture(entries, s.k)
	} else {
		d.rollRecords(s.k, nil)
	}
	<-indexed
	d.indexed = nil
	d.finishSeries(stated)
	return d, nil
}

// startAt makes the state before entry 0 tl's (its Initial and the
// allocations live before entry 0 outside its segments): the head, the
// series' start values and the first checkpoint.
func (d *devLog) startAt(tl *replay.Timeline) {
	d.head = stateFromSegments(tl.Initial)
	for _, a := range tl.Start() { // Initial leaves out those outside its segments
		b := &a.Block
		if _, ok := d.head.Block(b.Address); !ok {
			d.head.SetBlock(tiling.FromBlock(b))
		}
	}
	d.initActive = tl.ActiveAtStart
	d.initReserv = tl.ReservedAtStart
	var pend int64
	for b := range d.head.Blocks() {
		if b.State == snapshot.StateActivePendingFree {
			pend += b.Live()
		}
	}
	d.pending = pend
	d.initAllocated = d.initActive - pend
	d.cps = []*checkpoint{d.head.Freeze(0)}
}

// finishSeries completes a capture's series: active and reserved were
// stored relative to the start; allocated holds the pending-free bytes
// after each entry (allocated = active − pending). stated, if not nil,
// replaces them.
func (d *devLog) finishSeries(stated *DeviceTotals) {
	d.active.v.update(func(_ int, xs []int64) {
		for j := range xs {
			xs[j] += d.initActive
		}
	})
	d.allocated.v.update(func(lo int, xs []int64) {
		j := 0
		d.active.v.each(lo, lo+len(xs), func(p []int64) {
			for _, a := range p {
				xs[j] = a - xs[j]
				j++
			}
		})
	})
	d.reserved.addAll(d.initReserv)
	if stated != nil {
		d.initAllocated, d.initReserv, d.initActive = stated.Init.Allocated, stated.Init.Reserved, stated.Init.Active
		// chunk by chunk, so that each is packed again for its new values
		d.allocated.v.update(func(lo int, xs []int64) {
			for j := range min(len(xs), len(stated.After)-lo) {
				xs[j] = stated.After[lo+j].Allocated
			}
		})
		d.active.v.update(func(lo int, xs []int64) {
			for j := range min(len(xs), len(stated.After)-lo) {
				xs[j] = stated.After[lo+j].Active
			}
		})
		d.reserved = d.reserved.replaced(stated.After)
	}
	d.active.reindex()
	d.allocated.reindex()
	d.reserved.reindex()
}

// intervalHi is devLog.ivHi of device dev's entries: one backward pass
// carrying the next exact entry's time (Snapshot.TimeInterval's bound).
func intervalHi(snap *snapshot.Snapshot, dev int, entries []snapshot.TraceEntry) []int64 {
	if dev >= len(snap.TimeExact) || len(snap.TimeExact[dev]) != len(entries) || !slices.Contains(snap.TimeExact[dev], false) {
		return nil
	}
	ex := snap.TimeExact[dev]
	hi := make([]int64, len(entries))
	var next int64
	for i := len(entries) - 1; i >= 0; i-- {
		if ex[i] {
			hi[i], next = -1, entries[i].TimeUS
		} else {
			hi[i] = next
		}
	}
	return hi
}

// storeRecords is the record side of a capture's ingest (buildCapture):
// the records, and with own the entries they do not give back exactly
// (Store.Trace).
func (d *devLog) storeRecords(entries []snapshot.TraceEntry, own bool) {
	d.recs.reserve(len(entries))
	var last int64
	for i := range entries {
		e := &entries[i]
		seq := int64(i)
		r := d.recordOf(e, seq, &last)
		d.recs.append(r)
		if own && d.keep == nil && d.entryOf(&r) != *e {
			d.noteInexact(seq, e, entries)
		}
		if (i+1)%indexStep == 0 {
			d.indexed.Add(indexStep)
		}
	}
}

// storeSeries stores, from the records, the action indexes and the active
// and reserved series relative to the start.
func (d *devLog) storeSeries(counts *[256]int) {
	n := d.recs.Len()
	d.active.v.reserve(n)
	for a, c := range counts {
		d.byAction[snapshot.Action(a)].reserve(c)
	}
	var act, res int64
	var seq int64
	d.recs.each(0, n, func(p []recBody, acts []snapshot.Action) {
		for i := range p {
			e := snapshot.TraceEntry{Action: acts[i], Size: p[i].size}
			act += replay.ActiveDelta(&e)
			res += replay.ReservedDelta(&e)
			d.active.bulk(act)
			d.reserved.bulk(res)
			d.byAction[acts[i]].append(seq)
			seq++
		}
	})
}

// rollCapture is the segment-map side of a capture's ingest: it rolls the
// state forward from the initial one over every entry, dumping
// checkpoints, and keeps the pending-free bytes after each entry in the
// allocated series (buildCapture turns them into allocated bytes).
func (d *devLog) rollCapture(entries []snapshot.TraceEntry, k int) {
	d.allocated.v.reserve(len(entries))
	next := d.checkpointGap(k)
	for i := range entries {
		e := &entries[i]
		seq := int64(i)
		v := tiling.EntryOf(e)
		d.pending += d.head.Apply(&v, seq, d.id, &d.ov)
		d.allocated.bulk(d.pending)
		if seq+1 >= next {
			d.cps = append(d.cps, d.dumpPacked(seq+1))
			next = seq + 1 + d.checkpointGap(k)
		}
	}
}

// Totals are a device's byte totals as a source states them.
type Totals struct{ Allocated, Reserved, Active int64 }

// DeviceTotals are the totals a device's records state: Init before the
// first entry, After[i] after entry i; OK is false when a record lacks
// one. A profiler directory needs them: its memory records start mid-run
// and carry no segments, so the trace yields only what changed inside the
// window, while each record states the allocator's totals after it.
type DeviceTotals struct {
	Init  Totals
	After []Totals
	OK    bool
}

// prepass is what ingest learns from one pass over a capture's trace.
type prepass struct {
	ov      overrides
	counts  [256]int
	hasTime bool
}

func scanCapture(snap *snapshot.Snapshot, dev int, entries []snapshot.TraceEntry) prepass {
	var p prepass
	for i := range entries {
		p.counts[entries[i].Action]++
		p.hasTime = p.hasTime || entries[i].TimeUS != 0
	}
	p.ov = captureOverrides(snap, dev, len(entries), func(i int) (snapshot.Action, uint64) { return entries[i].Action, entries[i].Addr })
	return p
}

// captureOverrides finds the allocs and segment_allocs whose object survives
// to the end of the trace (n entries, at(i) giving entry i's action and
// address) and gives them the final state's attributes.
func captureOverrides(snap *snapshot.Snapshot, dev int, n int, at func(i int) (snapshot.Action, uint64)) overrides {
	ov := tiling.NewOverrides()
	if n > 0 {
		// a file's trace: blocks it re-creates are round_size(requested),
		// as replay's undo makes them. A live producer's SNAPSHOT has no
		// trace, and the entries appended after it keep their requested
		// sizes (the Store does not know the producer's rounding).
		ov.Round = replay.SizeRounder(snap)
	}
	finalSegs := map[uint64]*snapshot.Segment{}
	finalBlocks := map[uint64]*snapshot.Block{}
	for i := range snap.Segments {
		sg := &snap.Segments[i]
		if sg.Device != dev {
			continue
		}
		finalSegs[sg.Address] = sg
		for j := range sg.Blocks {
			if b := &sg.Blocks[j]; b.State.Active() {
				finalBlocks[b.Address] = b
			}
		}
	}
	// Walking backwards, the first alloc (segment_alloc) met at a final
	// address created the surviving object, unless a free met earlier shows
	// the final object came later; either way the address is settled.
	for i := n - 1; i >= 0 && len(finalBlocks)+len(finalSegs) > 0; i-- {
		action, addr := at(i)
		switch action {
		case snapshot.ActionAlloc, snapshot.ActionFree, snapshot.ActionFreeCompleted:
			if b, ok := finalBlocks[addr]; ok {
				if action == snapshot.ActionAlloc {
					ov.Blocks[int64(i)] = tiling.FromBlock(b)
				}
				delete(finalBlocks, addr)
			}
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree:
			if sg, ok := finalSegs[addr]; ok {
				if action == snapshot.ActionSegmentAlloc {
					c := *sg
					c.Blocks = nil
					ov.Segs[int64(i)] = c
				}
				delete(finalSegs, addr)
			}
		}
	}
	return ov
}

// attrTable interns attrs, one per device log.
type attrTable struct {
	list     []attr
	idx      map[attr]uint32
	last     uint32
	usedZero bool // an entry has the zero attr (list[0] is otherwise only a placeholder)
}

func newAttrTable() *attrTable {
	return &attrTable{list: []attr{{}}, idx: map[attr]uint32{{}: 0}}
}

func (t *attrTable) intern(a attr) uint32 {
	if t.list[t.last] == a {
		t.usedZero = t.usedZero || t.last == 0
		return t.last
	}
	id, ok := t.idx[a]
	if !ok {
		id = uint32(len(t.list))
		t.list = append(t.list, a)
		t.idx[a] = id
	}
	t.usedZero = t.usedZero || id == 0
	t.last = id
	return id
}

func attrOf(e *snapshot.TraceEntry) attr {
	return attr{stream: e.Stream, pool: e.PoolID, hasPool: e.HasPoolID, compileContext: e.CompileContext, userMetadata: e.UserMetadata}
}

// recordOf is entry e's record at log position seq; last is the time of the
// record before it, advanced so times never go backwards.
func (d *devLog) recordOf(e *snapshot.TraceEntry, seq int64, last *int64) rec {
	r := rec{addr: e.Addr, size: e.Size, frames: e.Frames, action: e.Action, attr: d.attrs.intern(attrOf(e))}
	if e.Action == snapshot.ActionOOM {
		r.addr = uint64(e.DeviceFree)
	}
	if d.base == TimeSequence {
		r.time = seq
	} else {
		r.time = max(e.TimeUS, *last)
		*last = r.time
	}
	return r
}

// appendEntries indexes entries at the end of the log. bulk (a whole
// capture) builds the series pyramids once at the end.
func (d *devLog) appendEntries(entries []snapshot.TraceEntry, k int, bulk bool) {
	var last int64
	act, res := d.initActive, d.initReserv
	if n := d.recs.Len(); n > 0 {
		last = d.recs.ptr(n - 1).time
		act, res = d.active.at(n-1), d.reserved.at(n-1)
	}
	next := d.cps[len(d.cps)-1].At + d.checkpointGap(k)
	for i := range entries {
		e := &entries[i]
		seq := int64(d.recs.Len())
		d.recs.append(d.recordOf(e, seq, &last))
		v := tiling.EntryOf(e)
		d.pending += d.head.Apply(&v, seq, d.id, &d.ov)
		act += replay.ActiveDelta(e)
		res += replay.ReservedDelta(e)
		if bulk {
			d.active.bulk(act)
			d.allocated.bulk(act - d.pending)
			d.reserved.bulk(res)
		} else {
			d.batchA = append(d.batchA, act)
			d.batchL = append(d.batchL, act-d.pending)
			d.batchR = append(d.batchR, res)
			if len(d.batchA) == seriesBatch {
				d.flushSeries()
			}
		}
		d.byAction[e.Action].append(seq)
		if seq+1 >= next {
			d.cps = append(d.cps, d.dumpPacked(seq+1)) // whole unless the log packs (a streamed capture)
			next = seq + 1 + d.checkpointGap(k)
		}
	}
	if !bulk {
		d.flushSeries()
	}
}

// seriesBatch: a live batch's series values are appended in pieces of at
// most this many (appendBatch), so its buffers stay small.
const seriesBatch = 1024

// flushSeries appends the values gathered in batchA/L/R to the series
// (nothing in appendEntries reads the series before).
func (d *devLog) flushSeries() {
	d.active.appendBatch(d.batchA)
	d.allocated.appendBatch(d.batchL)
	d.reserved.appendBatch(d.batchR)
	d.batchA, d.batchL, d.batchR = d.batchA[:0], d.batchL[:0], d.batchR[:0]
}

// checkpointGap is the number of entries until the next checkpoint: k, or
// the number of live blocks when there are more (a checkpoint copies every
// live block, so a trace holding many live blocks would otherwise spend more
// memory on checkpoints than on its entries; a seek then rolls forward at
// most as many entries as the state it builds has blocks). A streamed
// capture's provisional log spaces them sparse times wider.
func (d *devLog) checkpointGap(k int) int64 {
	return int64(max(k, d.head.Live()) * max(d.sparse, 1))
}

func newDevLog(id int, base TimeBase) *devLog {
	d := &devLog{id: id, base: base, attrs: newAttrTable(), head: tiling.NewState()}
	d.ov = tiling.NewOverrides()
	return d
}

// putDev installs a device log; the caller holds the write lock.
func (s *Store) putDev(d *devLog) {
	if _, ok := s.devs[d.id]; !ok {
		s.ids = append(s.ids, d.id)
		slices.Sort(s.ids)
	}
	s.devs[d.id] = d
}

// dev returns the log of device id, creating an empty live one when absent.
// The caller holds the write lock.
func (s *Store) liveDev(id int) *devLog {
	d, ok := s.devs[id]
	if !ok {
		d = newDevLog(id, TimeEpochUS)
		d.cps = []*checkpoint{d.head.Freeze(0)}
		s.putDev(d)
	}
	return d
}

// StartLive begins a live session: initial is the producer's current state
// (its device traces, if any, become the start of each log, exactly as a
// capture); devices describes the hardware. Later entries come via Append.
// Calling it again (a reconnect) replaces the logs of the devices initial
// holds and keeps the others.
func (s *Store) StartLive(initial *snapshot.Snapshot, devices []DeviceInfo) error {
	if initial != nil {
		if err := s.IngestSnapshot(initial); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, di := range devices {
		s.info[di.ID] = di
		d := s.liveDev(di.ID)
		if d.recs.Len() == 0 {
			d.base = TimeEpochUS
		}
	}
	if initial != nil {
		for _, id := range initial.Devices() {
			if d := s.devs[id]; d != nil && d.recs.Len() == 0 {
				d.base = TimeEpochUS
			}
		}
	}
	s.changed()
	return nil
}

// Append adds live entries (TimeUS in epoch µs) to device's log. Frames ids
// must be ids of this Store's stack table (see InternStack). Safe while
// queries run.
func (s *Store) Append(device int, entries []snapshot.TraceEntry) {
	if len(entries) == 0 {
		return
	}
	s.mu.Lock()
	d := s.liveDev(device)
	d.appendEntries(entries, s.k, false)
	s.retainDev(d)
	s.mu.Unlock()
	s.changed()
}

// retainDev thins d when its window is full; the caller holds the write lock.
func (s *Store) retainDev(d *devLog) {
	if !s.retain.Enabled() {
		return
	}
	if to := d.retainDue(s.retain); to > d.off {
		d.thinTo(to)
		s.retainOps()
	}
}

// AppendSized is Append with, per entry, the rounded size of the block an
// alloc entry created (blockSizes[i] > 0; a producer that can see its
// allocator's blocks sends it): the block takes that size in the segment
// map, as a capture's surviving blocks take the final state's. blockSizes
// may be shorter than entries or nil.
func (s *Store) AppendSized(device int, entries []snapshot.TraceEntry, blockSizes []int64) {
	if len(entries) == 0 {
		return
	}
	s.mu.Lock()
	d := s.liveDev(device)
	n := d.recs.Len()
	if d.ov.Sizes == nil {
		d.ov.Sizes = d.sizeAt
	}
	for d.sizes.Len() < n { // entries appended without sizes
		d.sizes.append(0)
	}
	for i := range entries {
		var bs int64
		if i < len(blockSizes) && entries[i].Action == snapshot.ActionAlloc && blockSizes[i] != entries[i].Size {
			bs = max(blockSizes[i], 0)
		}
		d.sizes.append(bs)
	}
	d.appendEntries(entries, s.k, false)
	s.retainDev(d)
	s.mu.Unlock()
	s.changed()
}

// Rebase replaces device's current state with segs (a fresh producer
// snapshot after a gap): a resync marker entry is appended, after which
// queries see segs and the byte series continue from its totals. The
// entries before it keep their figures and segment maps.
func (s *Store) Rebase(device int, segs []snapshot.Segment) {
	s.mark(device, segs, ActionResync, 0)
}

// Restart is Rebase for a new producer process (pid): the marker entry is
// a restart, shown on the timeline and in the event list.
func (s *Store) Restart(device int, segs []snapshot.Segment, pid int) {
	s.mark(device, segs, ActionRestart, pid)
}

func (s *Store) mark(device int, segs []snapshot.Segment, action snapshot.Action, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.liveDev(device)
	var mine []snapshot.Segment
	for i := range segs {
		if segs[i].Device == device {
			mine = append(mine, segs[i])
		}
	}
	d.appendMarker(mine, action, pid, s.now().UnixMicro())
	s.retainDev(d)
	s.changed()
}

// NoteGap records that the producer dropped missed entries of device here;
// missed 0 records a hole of unknown size.
func (s *Store) NoteGap(device int, missed int64) {
	if missed < 0 {
		return
	}
	s.mu.Lock()
	d := s.liveDev(device)
	d.gaps = append(d.gaps, GapRecord{At: int64(d.recs.Len()), Missed: missed})
	d.missed += missed
	s.mu.Unlock()
	s.changed()
}

// Gaps returns the gap records of device, oldest first.
func (s *Store) Gaps(device int) []GapRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.devs[device]; d != nil {
		return slices.Clone(d.gaps)
	}
	return nil
}

// SetDeviceInfo records live device information (HBM used/total).
func (s *Store) SetDeviceInfo(info DeviceInfo) {
	s.mu.Lock()
	s.info[info.ID] = info
	s.mu.Unlock()
	s.changed()
}

// DeviceInfo returns what SetDeviceInfo or StartLive recorded.
func (s *Store) DeviceInfo(device int) (DeviceInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	di, ok := s.info[device]
	return di, ok
}

// InternStack adds a stack to the Store's table (live sources) and returns
// its id; identical stacks share one id.
func (s *Store) InternStack(st snapshot.Stack) snapshot.StackID {
	if len(st) == 0 {
		return snapshot.NoStack
	}
	key := stackKey(st)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stackIdx == nil {
		s.stackIdx = make(map[string]snapshot.StackID, len(s.stacks))
		for i := 1; i < len(s.stacks); i++ {
			s.stackIdx[stackKey(s.stacks[i])] = snapshot.StackID(i)
		}
	}
	if id, ok := s.stackIdx[key]; ok {
		return id
	}
	id := snapshot.StackID(len(s.stacks))
	s.stacks = append(s.stacks, slices.Clone(st))
	s.stackIdx[key] = id
	return id
}

func stackKey(st snapshot.Stack) string {
	var b []byte
	for _, f := range st {
		b = append(b, f.Filename...)
		b = append(b, 0)
		b = fmt.Appendf(b, "%d", f.Line)
		b = append(b, 0)
		b = append(b, f.Name...)
		b = append(b, 0)
	}
	return string(b)
}

// Stack returns the frames of id (nil for NoStack or an unknown id). The
// frames are shared and must not be modified.
func (s *Store) Stack(id snapshot.StackID) snapshot.Stack {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if id <= 0 || int(id) >= len(s.stacks) {
		return nil
	}
	return s.stacks[id]
}

// Annotations returns the capture's external annotations (step markers).
func (s *Store) Annotations() []snapshot.Annotation {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.annotations)
}

// ---- ops ----

// IngestOps adds profiler ops read from files.
func (s *Store) IngestOps(ops []Op) { s.AppendOps(ops) }

// AppendOps adds ops (live or from files); they may arrive in any order.
func (s *Store) AppendOps(ops []Op) {
	if len(ops) == 0 {
		return
	}
	if !slices.IsSortedFunc(ops, cmpOp) {
		ops = slices.Clone(ops)
		slices.SortStableFunc(ops, cmpOp)
	}
	s.mu.Lock()
	from := len(s.ops)
	if from > 0 && cmpOp(s.ops[from-1], ops[0]) > 0 {
		// merge, back to front, with the ops they land among: linear in
		// those and the new ones (ops arriving in reverse time order cost
		// no re-sort of everything before them)
		lo := sort.Search(from, func(i int) bool { return cmpOp(s.ops[i], ops[0]) > 0 })
		s.ops = slices.Grow(s.ops, len(ops))[:from+len(ops)]
		i, j := from-1, len(ops)-1
		for k := len(s.ops) - 1; j >= 0; k-- {
			if i >= lo && cmpOp(s.ops[i], ops[j]) > 0 {
				s.ops[k] = s.ops[i]
				i--
			} else {
				s.ops[k] = ops[j]
				j--
			}
		}
		from = lo
	} else {
		s.ops = append(s.ops, ops...)
	}
	s.opsVer++
	s.opsEdits[s.opsVer%opsEditRing] = opsEdit{s.opsVer, from}
	s.opMaxEnd = s.opMaxEnd[:from]
	for i := from; i < len(s.ops); i++ {
		m := s.ops[i].EndUS
		if i > 0 {
			m = max(m, s.opMaxEnd[i-1])
		}
		s.opMaxEnd = append(s.opMaxEnd, m)
	}
	s.opIdx.Update(s.opTable(), from)
	s.retainOps()
	s.mu.Unlock()
	s.changed()
}

// opsEdit records the lowest op index an AppendOps call changed.
type opsEdit struct {
	ver  uint64
	from int
}

// opsEditRing is how many AppendOps calls OpsSince can answer incrementally.
const opsEditRing = 64

// OpsSince returns what changed in the start-ordered op list since ver, a
// version an earlier call returned (0: nothing known): the ops from index
// from on, which replace the caller's ops from that index, and the current
// version. A reader that keeps up copies only the new ops; one that fell
// more than 64 appends behind gets the whole list (from = 0).
func (s *Store) OpsSince(ver uint64) (ops []Op, from int, now uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	now = s.opsVer
	switch {
	case ver == now:
		return nil, len(s.ops), now
	case ver == 0 || ver > now || now-ver > opsEditRing:
		from = 0
	default:
		from = len(s.ops)
		for v := ver + 1; v <= now; v++ {
			from = min(from, s.opsEdits[v%opsEditRing].from)
		}
	}
	return slices.Clone(s.ops[from:]), from, now
}

func cmpOp(a, b Op) int {
	// Outer (longer) first among ops that start together.
	return cmp.Or(cmp.Compare(a.StartUS, b.StartUS), cmp.Compare(b.EndUS, a.EndUS))
}

// Ops returns the ops overlapping [t0, t1), ordered by start.
func (s *Store) Ops(t0, t1 int64) []Op {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Op
	i := sort.Search(len(s.ops), func(i int) bool { return s.opMaxEnd[i] > t0 })
	for ; i < len(s.ops) && s.ops[i].StartUS < t1; i++ {
		o := s.ops[i]
		if o.EndUS > t0 || (o.EndUS == o.StartUS && o.StartUS >= t0) {
			out = append(out, o)
		}
	}
	return out
}

// opTable is the ops as oprange searches them (steps skipped); s.mu held.
func (s *Store) opTable() oprange.Sorted { return oprange.Sorted{Ops: s.ops, Ends: s.opMaxEnd} }

// OpAt returns the op an entry at time t is attributed to: the innermost
// non-step op whose interval contains t, ends included (oprange.Innermost,
// docs/timeline.md "Op attribution").
func (s *Store) OpAt(t int64) (Op, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i := s.opIdx.Innermost(s.opTable(), t); i >= 0 {
		return s.ops[i], true
	}
	return Op{}, false
}

// OpOf returns the op entry e is attributed to: OpAt its time, or, for an
// entry whose time is only an interval (Event.Interval), the op
// oprange.Interval gives it — what ran next after the last known moment,
// as explain's OOM op (docs/timerecovery.md).
func (s *Store) OpOf(e Event) (Op, bool) {
	if !e.Interval {
		return s.OpAt(e.Time)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i := s.opIdx.Interval(s.opTable(), e.Time, e.TimeHi); i >= 0 {
		return s.ops[i], true
	}
	return Op{}, false
}
