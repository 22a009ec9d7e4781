package wire

import (
	"sync"

	"github.com/npumon/npumon/allocator/snapshot"
)

// readFrame is one frame read ahead of its processing.
type readFrame struct {
	p    []byte
	err  error
	cost int64    // what it counts against the read-ahead's bound (frameCost)
	dec  *decoded // an ENTRIES frame the reading goroutine decoded (nil: not decoded)
	slab *slab    // the slab p lies in (nil: a buffer of its own)
	typ  byte
	more bool // the next frame's header was already buffered (no network wait)
}

// slab is a block of memory that frames are read into one after the
// other: a frame costs its length, not a buffer's capacity, and a slab
// whose frames are all done is reused whole, so a backlog that forms
// again is read into memory already mapped (fresh pages cost the reading
// goroutine a page fault every 4 KiB, some 300 entries).
type slab struct {
	b       []byte
	off     int  // b[:off] holds frames
	refs    int  // frames in it not done yet
	retired bool // no more frames go in: pooled once refs is 0
}

// decoded is an ENTRIES frame decoded ahead of its processing.
type decoded struct {
	dev   int
	first uint64
	ents  []snapshot.TraceEntry
	sizes []int64
}

// decodeAhead: the reading goroutine decodes ENTRIES frames (those the fast
// decoder takes: no strings, no actions by name) while at most this many
// decoded frames wait or are being stored, so the Store goroutine only
// stores them; past it (a backlog) frames wait encoded, ≈ 13 bytes an entry
// instead of 120. At most decodeAhead such buffers exist (besides the
// Store goroutine's own): ≤ 65,536 entries each, ≤ 7.5 MiB.
const decodeAhead = 2

// readAheadBytes bounds the memory of the frames a client has read from its
// socket and not yet processed, their bookkeeping included: at about 13
// bytes per entry of the live benchmark's pattern, some 10 million entries
// (10 s at 1 M entries/s) that a busy or starved attach takes in later
// instead of leaving them to the producer's queue, which drops them. On a
// loaded 2-core host the Store goroutine falls behind for seconds at a
// time: in a 60 s run at 1 M entries/s with the UI drawing and the other
// core spinning, backlogs of 35 MiB built up over 8 s and drained, and at
// load 20 one reached the bound over 25 s (BENCHMARKS.md, Live at 1 M/s and
// round four). Slabs kept for reuse add at most readAheadPool.
var readAheadBytes int64 = 128 << 20 // a variable for tests

// readAheadPool bounds the idle slabs a read-ahead keeps for reuse (16 MiB,
// or a quarter of readAheadBytes when that is less) once no backlog needs
// them: after a backlog drains, the next one is read into them rather than
// into fresh allocations. While a backlog is queued the pool may hold as
// much as is queued (the reading goroutine takes it back as the Store
// goroutine gives it), within readAheadBytes plus this in all.
func readAheadPool() int64 { return min(readAheadBytes/4, 16<<20) }

// slabSize is the size of a read-ahead's slabs (1 MiB, or a sixteenth of
// readAheadBytes when that is less); a larger frame gets a buffer of its own.
func slabSize() int { return int(min(readAheadBytes/16, 1<<20)) }

// frameOverhead is what a queued frame costs besides its buffer: its ring
// slot (64 bytes), twice over, as the ring doubles.
const frameOverhead = 128

// shrinkRing: an emptied ring longer than this is given back.
const shrinkRing = 4096

// frameCost is what a read-ahead frame counts against readAheadBytes.
func frameCost(p []byte) int64 { return int64(cap(p)) + frameOverhead }

// readAhead holds the frames read from a connection and not yet
// processed, in order: a ring that starts small and doubles as a backlog
// forms (a starved Store goroutine, queries holding the Store), bounded by
// readAheadBytes. The reading goroutine waits when the bound is reached;
// the socket then fills and the producer's bounded queue takes the rest
// (it drops the oldest for this client and says so with a GAP, counted as
// missed). Frames are read into slabs, which come back to a pool for the
// next reads once their frames are processed.
type readAhead struct {
	mu     sync.Mutex
	ring   []readFrame
	h, n   int   // first queued frame, number queued
	held   int64 // cost of the queued frames and of the one being processed
	peak   int64 // the most held at once
	max    int64
	cur    *slab // the slab the next frame goes into
	pool   []*slab
	pooled int64 // bytes of the slabs in pool
	slabs  int   // slabs allocated (tests: reuse)
	// decoding ahead (predecode): frames decoded and not yet done, and
	// the buffers of done ones
	decoding int
	decPool  []*decoded
	ready    chan struct{} // cap 1: a frame was queued
	room     chan struct{} // cap 1: held went down
	quit     chan struct{} // closed: the session ended
}

func newReadAhead() *readAhead {
	return &readAhead{ring: make([]readFrame, 16), max: readAheadBytes,
		ready: make(chan struct{}, 1), room: make(chan struct{}, 1), quit: make(chan struct{})}
}

// stop ends the session: put and take return false from then on.
func (ra *readAhead) stop() { close(ra.quit) }

// buffer returns the room left in the current slab, empty, for the next
// frame to be read into (a frame that does not fit takes alloc's).
func (ra *readAhead) buffer() []byte {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.cur == nil || ra.cur.off == len(ra.cur.b) {
		ra.nextSlabLocked()
	}
	return ra.cur.b[ra.cur.off:ra.cur.off]
}

// alloc returns a buffer for a frame of n bytes that did not fit the room
// buffer gave: the start of a fresh slab, or for a frame larger than a
// slab a buffer of its own.
func (ra *readAhead) alloc(n int) []byte {
	if n > slabSize() {
		return make([]byte, n)
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.nextSlabLocked()
	return ra.cur.b[:n]
}

// nextSlabLocked retires the current slab and makes a pooled (or new) one
// current.
func (ra *readAhead) nextSlabLocked() {
	if c := ra.cur; c != nil {
		c.retired = true
		if c.refs == 0 {
			ra.poolLocked(c)
		}
	}
	if k := len(ra.pool); k > 0 {
		ra.cur = ra.pool[k-1]
		ra.pool[k-1] = nil
		ra.pool = ra.pool[:k-1]
		ra.pooled -= int64(len(ra.cur.b))
		return
	}
	ra.cur = &slab{b: make([]byte, slabSize())}
	ra.slabs++
}

// place notes where a frame just read lies: in the current slab, it takes
// its room there and keeps the slab until done; its capacity is cut to its
// length, which is then what it costs.
func (ra *readAhead) place(f *readFrame) {
	if len(f.p) == 0 {
		return
	}
	ra.mu.Lock()
	if c := ra.cur; c != nil && c.off < len(c.b) && &f.p[0] == &c.b[c.off] {
		c.off += len(f.p)
		c.refs++
		f.p = f.p[:len(f.p):len(f.p)]
		f.slab = c
	}
	ra.mu.Unlock()
}

// poolLocked keeps an emptied slab for reuse, within readAheadPool or,
// while a backlog is queued, within what is queued (and the bound).
func (ra *readAhead) poolLocked(s *slab) {
	n := int64(len(s.b))
	if ra.pooled+n <= readAheadPool() || ra.pooled+n <= ra.held && ra.pooled+ra.held+n <= ra.max+readAheadPool() {
		s.off, s.refs, s.retired = 0, 0, false
		ra.pool = append(ra.pool, s)
		ra.pooled += n
	}
}

// put queues a frame read, waiting while it would take the read-ahead past
// its bound (a frame larger than the bound passes alone); false when the
// session ended first.
func (ra *readAhead) put(f readFrame) bool {
	f.cost = frameCost(f.p)
	ra.mu.Lock()
	for ra.held > 0 && ra.held+f.cost > ra.max {
		ra.mu.Unlock()
		select {
		case <-ra.room:
		case <-ra.quit:
			return false
		}
		ra.mu.Lock()
	}
	if ra.n == len(ra.ring) {
		ring := make([]readFrame, 2*len(ra.ring))
		k := copy(ring, ra.ring[ra.h:])
		copy(ring[k:], ra.ring[:ra.h])
		ra.ring, ra.h = ring, 0
	}
	ra.ring[(ra.h+ra.n)%len(ra.ring)] = f
	ra.n++
	ra.held += f.cost
	ra.peak = max(ra.peak, ra.held)
	ra.mu.Unlock()
	select {
	case ra.ready <- struct{}{}:
	default:
	}
	return true
}

// takeHook, when set (tests), runs before take hands out a frame: a
// consumer that stalls there is a starved Store goroutine.
var takeHook func()

// take returns the next frame, waiting for it; false when the session
// ended first. The frame stays counted until done.
func (ra *readAhead) take() (readFrame, bool) {
	if takeHook != nil {
		takeHook()
	}
	for {
		ra.mu.Lock()
		if ra.n > 0 {
			f := ra.ring[ra.h]
			ra.ring[ra.h] = readFrame{}
			ra.h = (ra.h + 1) % len(ra.ring)
			ra.n--
			if ra.n == 0 && len(ra.ring) > shrinkRing {
				ra.ring, ra.h = make([]readFrame, 16), 0 // a backlog drained
			}
			ra.mu.Unlock()
			return f, true
		}
		ra.mu.Unlock()
		select {
		case <-ra.ready:
		case <-ra.quit:
			return readFrame{}, false
		}
	}
}

// predecode decodes an ENTRIES frame on the reading goroutine when few
// decoded frames wait (decodeAhead) and the fast decoder takes it; the
// Store goroutine decodes the others itself, as before.
func (ra *readAhead) predecode(f *readFrame) {
	if f.typ != frameEntries || f.err != nil {
		return
	}
	ra.mu.Lock()
	if ra.decoding >= decodeAhead {
		ra.mu.Unlock()
		return
	}
	ra.decoding++
	var d *decoded
	if k := len(ra.decPool); k > 0 {
		d = ra.decPool[k-1]
		ra.decPool = ra.decPool[:k-1]
	} else {
		d = &decoded{}
	}
	ra.mu.Unlock()
	var ok bool
	d.dev, d.first, d.ents, d.sizes, ok = decodeEntriesFast(f.p, d.ents[:0], d.sizes[:0])
	if ok {
		f.dec = d
		return
	}
	ra.mu.Lock()
	ra.decoding--
	ra.decPool = append(ra.decPool, d)
	ra.mu.Unlock()
}

// done gives back a processed frame: its cost, and its slab once every
// frame in it is done (nothing keeps a frame's bytes once processed). The
// pool gives back what a drained backlog no longer needs.
func (ra *readAhead) done(f readFrame) {
	if f.cost == 0 {
		return
	}
	ra.mu.Lock()
	if f.dec != nil {
		ra.decoding--
		ra.decPool = append(ra.decPool, f.dec)
	}
	ra.held -= f.cost
	if s := f.slab; s != nil {
		if s.refs--; s.refs == 0 && s.retired {
			ra.poolLocked(s)
		}
	}
	for k := len(ra.pool); k > 0 && ra.pooled > max(readAheadPool(), ra.held); k-- {
		ra.pooled -= int64(len(ra.pool[k-1].b))
		ra.pool[k-1] = nil
		ra.pool = ra.pool[:k-1]
	}
	ra.mu.Unlock()
	select {
	case ra.room <- struct{}{}:
	default:
	}
}

// readAheadStats are a read-ahead's figures: what it holds now and the
// most it held at once (bytes, as counted against readAheadBytes).
type readAheadStats struct{ Held, Peak int64 }

func (ra *readAhead) stats() readAheadStats {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return readAheadStats{ra.held, ra.peak}
}

// readAheadStats returns the current (or last) session's read-ahead figures.
func (c *Client) readAheadStats() readAheadStats {
	c.mu.Lock()
	ra := c.ra
	c.mu.Unlock()
	if ra == nil {
		return readAheadStats{}
	}
	return ra.stats()
}
