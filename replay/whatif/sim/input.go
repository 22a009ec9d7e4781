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
	in := &input{device: tl.Device, entries: entries, until: 1<<31 - 1}
	in.stats.Entries = len(entries)
	n := len(entries)

	// next[i]: the next alloc-family entry naming the same address.
	next := make([]int32, n)
	last := make(map[uint64]int32)
	for i := n - 1; i >= 0; i-- {
		e := &entries[i]
		if !e.Action.IsAllocFamily() {
			continue
		}
		if j, ok := last[e.Addr]; ok {
			next[i] = j
		} else {
			next[i] = -1
		}
		last[e.Addr] = int32(i)
	}
	inits := tl.Start()

	const (
		absent = iota
		live
		pending
	)
	type addrState struct {
		state uint8
		id    int32
	}
	state := make(map[uint64]addrState, len(inits)+1024)
	in.ops = make([]op, 0, len(inits)+n)
	newID := func() int32 { in.ids++; return int32(in.ids - 1) }
	for i := range inits {
		x := &inits[i]
		size := x.Size()
		if size < 0 {
			in.stats.Unmatched++
			continue
		}
		id := newID()
		in.ops = append(in.ops, op{kind: opAlloc, entry: -1, at: -1, id: id, stream: x.Stream, size: size})
		state[x.Block.Address] = addrState{live, id}
		in.stats.Initial++
		in.stats.InitialBytes += size
		if _, named := last[x.Block.Address]; !named { // rule (b): a ghost block
			in.stats.Ghosts++
			in.stats.GhostBytes += size
		}
	}
	never := int32(n) // completes after the last entry
	free := func(i int, id int32, doneAt int32) {
		in.ops = append(in.ops, op{kind: opFree, entry: int32(i), at: int32(i), id: id, doneAt: doneAt})
		in.stats.Frees++
		if doneAt > int32(i)+1 {
			in.stats.DeferredFrees++
		}
	}
	var floor int32
	skip := map[int]bool{} // entries of workspace triples
	for i := range entries {
		if len(empties) > 0 && empties[0].start == int32(i) {
			in.ops = append(in.ops, op{kind: opEmptyCache, entry: int32(i), at: int32(i)})
			in.stats.EmptyCaches++
			floor = empties[0].end // a later malloc does not own these releases
			empties = empties[1:]
		}
		e := &entries[i]
		if e.Action == snapshot.ActionWorkspaceSnapshot {
			size, at := e.Size, int32(i)
			for j := i + 1; j < min(i+3, n); j++ { // its segment_alloc and alloc
				if x := &entries[j]; x.Addr == e.Addr && (x.Action == snapshot.ActionSegmentAlloc || x.Action == snapshot.ActionAlloc) {
					if x.Action == snapshot.ActionSegmentAlloc {
						size, at = x.Size, int32(j) // the recording reserves it there
					}
					skip[j] = true
				}
			}
			if size > 0 {
				in.ops = append(in.ops, op{kind: opExternal, entry: int32(i), at: at, size: size})
				in.stats.Workspace++
			}
			continue
		}
		if skip[i] {
			continue
		}
		st := state[e.Addr]
		switch e.Action {
		case snapshot.ActionAlloc:
			if e.Size < 0 { // a damaged entry: nothing to allocate
				in.stats.Unmatched++
				continue
			}
			if st.state == live { // a free the trace lost: release the old one first
				free(i, st.id, -1)
				in.stats.Unmatched++
			}
			id := newID()
			in.ops = append(in.ops, op{kind: opAlloc, entry: int32(i), at: max(mallocStart(entries, i), floor), id: id, stream: e.Stream, size: e.Size})
			state[e.Addr] = addrState{live, id}
			in.stats.Allocs++
		case snapshot.ActionFreeRequested:
			if st.state != live {
				in.stats.Unmatched++
				continue
			}
			doneAt := int32(-1)
			j := next[i]
			switch {
			case j < 0:
				doneAt = never // still pending when the trace ends
			case entries[j].Action == snapshot.ActionFreeCompleted && int(j) > i+1:
				doneAt = j
			}
			free(i, st.id, doneAt)
			state[e.Addr] = addrState{pending, -1}
		case snapshot.ActionFreeCompleted, snapshot.ActionFree:
			switch st.state {
			case pending:
				delete(state, e.Addr)
			case live: // free_requested not recorded: treat as an immediate free
				free(i, st.id, -1)
				delete(state, e.Addr)
			default:
				in.stats.Unmatched++
			}
		case snapshot.ActionOOM:
			if e.Size < 0 {
				in.stats.Unmatched++
				continue
			}
			in.ops = append(in.ops, op{kind: opOOM, entry: int32(i), at: max(mallocStart(entries, i), floor), stream: e.Stream, size: e.Size})
			in.stats.OOMRequests++
		}
	}

	in.inside = make([]bool, n)
	for i := range in.ops {
		if o := &in.ops[i]; (o.kind == opAlloc || o.kind == opOOM) && o.entry >= 0 {
			for j := o.at; j < o.entry; j++ {
				in.inside[j] = true
			}
		}
	}
	seen := map[uint64]bool{}
	for i := range in.ops {
		if o := &in.ops[i]; (o.kind == opAlloc || o.kind == opOOM) && !seen[o.stream] {
			seen[o.stream] = true
			in.streams = append(in.streams, o.stream)
		}
	}
	slices.Sort(in.streams)
	return in
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
