package explain

import (
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Note [running sums]
//
// explain stops at every step end to read each group's live bytes there
// (the leak suspects' series). Summing the live allocations at each step
// end cost O(live) per step end: a trace with a step every few entries and
// thousands of blocks live (an inference server doing the same thing over
// and over, a loop of one allocation) took O(steps × live), half a minute
// on 200,000 entries. Instead the Walker keeps, for the grouper it tracks
// (Walker.track), every key's live bytes and allocation count up to date
// as it adds, changes and removes allocations, and the ids changed since
// the last step end: a step end costs O(keys changed), not O(live
// allocations). Each allocation remembers its key's id, looked up at the
// first step end it lives at (Walker.flush): a free looks no key up, an
// allocation that dies within its step (the temporaries of a loop) never
// has its key looked up, and no allocation's key is looked up more often
// than the old sums did (at every step end it lived at) or than it was
// made or changed. The lookups are cached (by stack id for a call site, by
// stream, by category): an op's (a search of the op tree, oprange.Index)
// is the costly one.
//
// The series keep only those changes (keyHist), so their memory is
// O(changes) too, and leakSuspects walks each key's changes instead of
// every step end. A key is "present" at a step end while it holds a live
// allocation (count > 0), as the map of a sum over the live allocations
// held it, with whatever bytes (0 and negative ones too); without one its
// bytes are 0.
//
// The categories' bytes (what grew) are read at the stops only, two sums
// over the live allocations per stop at most, and the allocations' own
// figures (each key's largest) once, at the last step end.

// keySums are the running sums of one grouper's keys over a Walker's live
// allocations (Note [running sums]).
type keySums struct {
	g *Grouper
	// key ids: ids by key, keys by id
	ids  map[string]int32
	keys []string
	// per id: Σ live bytes and the number of live allocations
	bytes []int64
	count []int32
	// the ids changed since the last take, each once
	changed []int32
	dirty   []bool
	// sizeKeyed: the key depends on the allocation's size (BySize), so a
	// partial free may move it to another key
	sizeKeyed bool
	// caches of the ids: by stack id (call site or stack key of an
	// allocation without a forward traceback; -1 not looked up), by stack
	// pair otherwise, by stream, by category
	byStack  []int32
	byPair   map[stackPair]int32
	byStream map[uint64]int32
	byCat    []int32
}

// maxStackCache bounds the stack ids cached in a slice (larger ones go to
// byPair): a file's stack ids are dense, a crafted one's need not be.
const maxStackCache = 1 << 20

func newKeySums(g *Grouper) *keySums {
	return &keySums{g: g, ids: map[string]int32{}, sizeKeyed: g.By == BySize}
}

// intern is k's id, a new one when k is new.
func (s *keySums) intern(k string) int32 {
	id, ok := s.ids[k]
	if !ok {
		id = int32(len(s.keys))
		s.ids[k] = id
		s.keys = append(s.keys, k)
		s.bytes = append(s.bytes, 0)
		s.count = append(s.count, 0)
		s.dirty = append(s.dirty, false)
	}
	return id
}

// id is the id of a's key (Grouper.Key), cached where the key depends on
// one field.
func (s *keySums) id(a *replay.Alloc) int32 {
	g := s.g
	switch g.By {
	case ByCallsite, ByStack:
		p := stackPair{a.Frames, snapshot.NoStack}
		if g.By == ByCallsite {
			p.fwd = a.Forward
		}
		if p.fwd == snapshot.NoStack && p.id >= 0 && p.id < maxStackCache {
			if int(p.id) >= len(s.byStack) {
				n := max(int(p.id)+1, 2*len(s.byStack), 64)
				for len(s.byStack) < n {
					s.byStack = append(s.byStack, -1)
				}
			}
			if id := s.byStack[p.id]; id >= 0 {
				return id
			}
			id := s.intern(g.Key(a))
			s.byStack[p.id] = id
			return id
		}
		if s.byPair == nil {
			s.byPair = map[stackPair]int32{}
		}
		id, ok := s.byPair[p]
		if !ok {
			id = s.intern(g.Key(a))
			s.byPair[p] = id
		}
		return id
	case ByStream:
		if s.byStream == nil {
			s.byStream = map[uint64]int32{}
		}
		id, ok := s.byStream[a.Stream]
		if !ok {
			id = s.intern(g.Key(a))
			s.byStream[a.Stream] = id
		}
		return id
	case ByCategory:
		if g.Category == nil {
			break
		}
		c := g.Category(a)
		for int(c) >= len(s.byCat) {
			s.byCat = append(s.byCat, -1)
		}
		if s.byCat[c] < 0 {
			s.byCat[c] = s.intern(c.String())
		}
		return s.byCat[c]
	}
	return s.intern(g.Key(a))
}

// add counts size bytes of one more allocation under id (n = 1), or one
// fewer (n = -1, size negated).
func (s *keySums) add(id int32, size int64, n int32) {
	s.bytes[id] += size
	s.count[id] += n
	if !s.dirty[id] {
		s.dirty[id] = true
		s.changed = append(s.changed, id)
	}
}

// take calls f with each id changed since the last take (in the order
// they first changed) and starts over.
func (s *keySums) take(f func(id int32)) {
	for _, id := range s.changed {
		s.dirty[id] = false
		f(id)
	}
	s.changed = s.changed[:0]
}

// keyHist is each key's bytes at the step ends (by their position in
// the steps) where they changed, from the running sums (Note [running
// sums]): the leak suspects' series, O(changes) instead of O(steps × keys).
type keyHist struct {
	sums  *keySums      // the sums it records
	steps int           // step ends recorded
	hist  [][]keyChange // by key id, ascending by step
}

// keyChange is a key's bytes from step end Step on, until its next change;
// Present whether it holds a live allocation. Before its first change a
// key holds 0 bytes and no allocation.
type keyChange struct {
	Step    int32
	Present bool
	Bytes   int64
}

// record is a step end: the keys changed since the last one.
func (h *keyHist) record() {
	s := h.sums
	step := int32(h.steps)
	h.steps++
	s.take(func(id int32) {
		for int(id) >= len(h.hist) {
			h.hist = append(h.hist, nil)
		}
		c := keyChange{Step: step, Present: s.count[id] > 0, Bytes: s.bytes[id]}
		l := keyChange{}
		if n := len(h.hist[id]); n > 0 {
			l = h.hist[id][n-1]
		}
		if l.Bytes != c.Bytes || l.Present != c.Present {
			h.hist[id] = append(h.hist[id], c)
		}
	})
}
