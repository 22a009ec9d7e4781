package sim

import (
	"slices"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/whatif"
)

// opKind is what the simulation does at one step.
type opKind uint8

const (
	opAlloc      opKind = iota // Malloc(size, stream) for allocation id
	opFree                     // Free(id), deferred until entry doneAt when > entry+1
	opOOM                      // the request a recorded oom entry failed: try it, free it at once
	opEmptyCache               // the program called empty_cache (inferred, see emptyCaches)
	opExternal                 // device memory outside the caching allocator (torch_npu workspace block)
)

// op is one step of a device's input sequence. Entry is the trace index it
// comes from; allocations live before the trace have entry -1.
type op struct {
	kind  opKind
	entry int32
	// at is where the recording shows this malloc's reserved change: the
	// first segment entry it emitted before its alloc (or oom) entry.
	// Simulated reserved changes are placed there.
	at     int32
	id     int32 // allocation id (opAlloc, opFree)
	doneAt int32 // opFree: entry of the matching free_completed; never = past the end
	stream uint64
	size   int64
}

// input is one device's operation sequence, shared read-only by all runs.
type input struct {
	device  int
	entries []snapshot.TraceEntry
	ops     []op
	ids     int // number of allocation ids
	streams []uint64
	stats   whatif.InputStats
	// inside marks the entries strictly inside a malloc: from its first
	// segment event up to (not including) its alloc or oom entry.
	inside []bool
	until  int32 // the last entry simulated (Options.Until)
}

// buildInput turns a device's timeline into the operation sequence the
// simulation replays, allocating what was live at the start first (in
// address order, which packs them the way the recorded segments held
// them); empties are the entry ranges of the inferred empty_cache calls,
// ascending.
func buildInput(tl *replay.Timeline, empties []span) *input {
	entries := tl.Entries
	n := len(entries)
	inits := tl.Start()
	b := &inputBuilder{
		in:      &input{device: tl.Device, entries: entries, until: 1<<31 - 1},
		entries: entries,
		empties: empties,
		state:   make(map[uint64]addrState, len(inits)+1024),
		never:   int32(n),
		skip:    map[int]bool{},
	}
	b.in.stats.Entries = n
	b.in.ops = make([]op, 0, len(inits)+n)
	var named map[uint64]int32
	b.next, named = nextSameAddr(entries)
	b.addInitial(inits, named)
	for i := range entries {
		b.addEntry(i)
	}
	markInside(b.in)
	collectStreams(b.in)
	return b.in
}

// The state of an address while the trace is turned into operations.
const (
	absent  = iota
	live    // allocated: id names the allocation
	pending // free_requested, free_completed still to come
)

type addrState struct {
	state uint8
	id    int32
}

// inputBuilder holds what buildInput needs from one entry to the next.
type inputBuilder struct {
	in      *input
	entries []snapshot.TraceEntry
	next    []int32 // see nextSameAddr
	empties []span  // the inferred empty_cache calls still to come
	state   map[uint64]addrState
	never   int32        // a doneAt that completes after the last entry
	floor   int32        // a malloc's reserved change is placed no earlier (the last empty_cache's end)
	skip    map[int]bool // entries of workspace triples
}

// nextSameAddr returns, per entry, the next alloc-family entry naming the
// same address (-1 when none; 0 for entries not of the alloc family), and
// the first alloc-family entry of each address.
func nextSameAddr(entries []snapshot.TraceEntry) (next []int32, first map[uint64]int32) {
	next = make([]int32, len(entries))
	first = make(map[uint64]int32)
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if !e.Action.IsAllocFamily() {
			continue
		}
		if j, ok := first[e.Addr]; ok {
			next[i] = j
		} else {
			next[i] = -1
		}
		first[e.Addr] = int32(i)
	}
	return next, first
}

func (b *inputBuilder) newID() int32 {
	b.in.ids++
	return int32(b.in.ids - 1)
}

// addInitial allocates the blocks live before the trace; named holds the
// addresses the trace names, so that the others count as ghosts.
func (b *inputBuilder) addInitial(inits []replay.StartAlloc, named map[uint64]int32) {
	in := b.in
	for i := range inits {
		x := &inits[i]
		size := x.Size()
		if size < 0 {
			in.stats.Unmatched++
			continue
		}
		id := b.newID()
		in.ops = append(in.ops, op{kind: opAlloc, entry: -1, at: -1, id: id, stream: x.Stream, size: size})
		b.state[x.Block.Address] = addrState{live, id}
		in.stats.Initial++
		in.stats.InitialBytes += size
		if _, ok := named[x.Block.Address]; !ok { // rule (b): a ghost block
			in.stats.Ghosts++
			in.stats.GhostBytes += size
		}
	}
}

// free appends the free of allocation id at entry i, completing at doneAt.
func (b *inputBuilder) free(i int, id int32, doneAt int32) {
	b.in.ops = append(b.in.ops, op{kind: opFree, entry: int32(i), at: int32(i), id: id, doneAt: doneAt})
	b.in.stats.Frees++
	if doneAt > int32(i)+1 {
		b.in.stats.DeferredFrees++
	}
}

// addEntry appends the operations of entry i: an inferred empty_cache that
// starts there, then the entry's own.
func (b *inputBuilder) addEntry(i int) {
	in := b.in
	if len(b.empties) > 0 && b.empties[0].start == int32(i) {
		in.ops = append(in.ops, op{kind: opEmptyCache, entry: int32(i), at: int32(i)})
		in.stats.EmptyCaches++
		b.floor = b.empties[0].end // a later malloc does not own these releases
		b.empties = b.empties[1:]
	}
	e := &b.entries[i]
	if e.Action == snapshot.ActionWorkspaceSnapshot {
		b.addWorkspace(i)
		return
	}
	if b.skip[i] {
		return
	}
	switch e.Action {
	case snapshot.ActionAlloc:
		b.addAlloc(i)
	case snapshot.ActionFreeRequested:
		b.addFreeRequested(i)
	case snapshot.ActionFreeCompleted, snapshot.ActionFree:
		b.addFreeCompleted(i)
	case snapshot.ActionOOM:
		b.addOOM(i)
	}
}

// addWorkspace turns the workspace triple starting at entry i into one
// external block, and marks its segment_alloc and alloc to be skipped.
func (b *inputBuilder) addWorkspace(i int) {
	e := &b.entries[i]
	size, at := e.Size, int32(i)
	for j := i + 1; j < min(i+3, len(b.entries)); j++ { // its segment_alloc and alloc
		if x := &b.entries[j]; x.Addr == e.Addr && (x.Action == snapshot.ActionSegmentAlloc || x.Action == snapshot.ActionAlloc) {
			if x.Action == snapshot.ActionSegmentAlloc {
				size, at = x.Size, int32(j) // the recording reserves it there
			}
			b.skip[j] = true
		}
	}
	if size > 0 {
		b.in.ops = append(b.in.ops, op{kind: opExternal, entry: int32(i), at: at, size: size})
		b.in.stats.Workspace++
	}
}

// addAlloc appends the allocation of entry i.
func (b *inputBuilder) addAlloc(i int) {
	in := b.in
	e := &b.entries[i]
	if e.Size < 0 { // a damaged entry: nothing to allocate
		in.stats.Unmatched++
		return
	}
	if st := b.state[e.Addr]; st.state == live { // a free the trace lost: release the old one first
		b.free(i, st.id, -1)
		in.stats.Unmatched++
	}
	id := b.newID()
	in.ops = append(in.ops, op{kind: opAlloc, entry: int32(i), at: max(mallocStart(b.entries, i), b.floor), id: id, stream: e.Stream, size: e.Size})
	b.state[e.Addr] = addrState{live, id}
	in.stats.Allocs++
}

// addFreeRequested appends the free of entry i, deferred to the matching
// free_completed when that does not directly follow.
func (b *inputBuilder) addFreeRequested(i int) {
	e := &b.entries[i]
	st := b.state[e.Addr]
	if st.state != live {
		b.in.stats.Unmatched++
		return
	}
	doneAt := int32(-1)
	j := b.next[i]
	switch {
	case j < 0:
		doneAt = b.never // still pending when the trace ends
	case b.entries[j].Action == snapshot.ActionFreeCompleted && int(j) > i+1:
		doneAt = j
	}
	b.free(i, st.id, doneAt)
	b.state[e.Addr] = addrState{pending, -1}
}

// addFreeCompleted handles a free_completed (or free) at entry i.
func (b *inputBuilder) addFreeCompleted(i int) {
	e := &b.entries[i]
	switch st := b.state[e.Addr]; st.state {
	case pending:
		delete(b.state, e.Addr)
	case live: // free_requested not recorded: treat as an immediate free
		b.free(i, st.id, -1)
		delete(b.state, e.Addr)
	default:
		b.in.stats.Unmatched++
	}
}

// addOOM appends the retried request of the oom entry i.
func (b *inputBuilder) addOOM(i int) {
	e := &b.entries[i]
	if e.Size < 0 {
		b.in.stats.Unmatched++
		return
	}
	b.in.ops = append(b.in.ops, op{kind: opOOM, entry: int32(i), at: max(mallocStart(b.entries, i), b.floor), stream: e.Stream, size: e.Size})
	b.in.stats.OOMRequests++
}

// markInside sets in.inside: the entries strictly inside a malloc.
func markInside(in *input) {
	in.inside = make([]bool, len(in.entries))
	for i := range in.ops {
		if o := &in.ops[i]; (o.kind == opAlloc || o.kind == opOOM) && o.entry >= 0 {
			for j := o.at; j < o.entry; j++ {
				in.inside[j] = true
			}
		}
	}
}

// collectStreams sets in.streams: the streams the allocations name,
// ascending.
func collectStreams(in *input) {
	seen := map[uint64]bool{}
	for i := range in.ops {
		if o := &in.ops[i]; (o.kind == opAlloc || o.kind == opOOM) && !seen[o.stream] {
			seen[o.stream] = true
			in.streams = append(in.streams, o.stream)
		}
	}
	slices.Sort(in.streams)
}

// mallocStart returns the entry where the recording shows the reserved
// change of the malloc that recorded the alloc or oom entry i: the first of
// the segment events it caused, found by walking back over them and over
// the deferred frees its process_events completed (a free_completed that
// does not directly follow its free_requested); i itself when it caused none.
func mallocStart(entries []snapshot.TraceEntry, i int) int32 {
	at := i
	for j := i; j > 0; j-- {
		e := &entries[j-1]
		if e.Action.IsSegmentFamily() {
			at = j - 1
			continue
		}
		if e.Action == snapshot.ActionFreeCompleted && j >= 2 {
			if p := &entries[j-2]; p.Action == snapshot.ActionFreeRequested && p.Addr == e.Addr {
				break // an immediate free, not part of this malloc
			}
			continue
		}
		break
	}
	return int32(at)
}

// span is a range of entries [start, end).
type span struct{ start, end int32 }

// isRelease reports a segment release (segment_free, segment_unmap).
func isRelease(a snapshot.Action) bool {
	return a == snapshot.ActionSegmentFree || a == snapshot.ActionSegmentUnmap
}

// deferredCompletion reports whether entry i is a free_completed that does
// not directly follow its free_requested.
func deferredCompletion(entries []snapshot.TraceEntry, i int) bool {
	e := &entries[i]
	if e.Action != snapshot.ActionFreeCompleted {
		return false
	}
	return i == 0 || entries[i-1].Action != snapshot.ActionFreeRequested || entries[i-1].Addr != e.Addr
}

// emptyCaches infers the empty_cache calls of a trace, which leave only
// their effects: a run of segment releases (and the deferred frees they
// synchronised). Inside a malloc such a run is always followed by the new
// segment (segment_alloc / segment_map) or by the oom entry, so a run
// followed by anything else was empty_cache. A run followed by a new
// segment is ambiguous; when forced may tell (the baseline has no
// max_split_size or GC, so only a full device forces a release), it gets
// the reserved bytes before the run and the new segment's size and says
// whether the device was full. On a contiguous device a release forced by
// the lack of one free range passes for empty_cache: the baseline comes out
// the same, an alternative gets one empty_cache too many.
func emptyCaches(entries []snapshot.TraceEntry, forced func(reservedBefore, segment int64) bool, reservedAt func(i int) int64) []span {
	var out []span
	n := len(entries)
	for i := 0; i < n; {
		if !isRelease(entries[i].Action) {
			i++
			continue
		}
		start := i
		for start > 0 && deferredCompletion(entries, start-1) {
			start-- // synchronize_and_free_events came first
		}
		for i < n && (isRelease(entries[i].Action) || deferredCompletion(entries, i)) {
			i++
		}
		empty := true
		if i < n {
			switch entries[i].Action {
			case snapshot.ActionOOM:
				empty = false
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
				empty = forced != nil && !forced(reservedAt(start-1), entries[i].Size)
			}
		}
		if empty {
			out = append(out, span{int32(start), int32(i)})
		}
	}
	return out
}
