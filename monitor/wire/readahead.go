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
	typ  byte
	more bool // the next frame's header was already buffered (no network wait)
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
// core spinning, backlogs of 35 MiB built up over 8 s and drained
// (BENCHMARKS.md, Live at 1 M/s). Idle frame buffers kept for reuse add at
// most readAheadPool.
var readAheadBytes int64 = 128 << 20 // a variable for tests

// readAheadPool bounds the idle frame buffers a read-ahead keeps for reuse
// (16 MiB, or a quarter of readAheadBytes when that is less): after a
// backlog drains, the next one is read into them rather than into fresh,
// zeroed allocations.
func readAheadPool() int64 { return min(readAheadBytes/4, 16<<20) }

// frameOverhead is what a queued frame costs besides its buffer: its ring
// slot (64 bytes), twice over, as the ring doubles.
const frameOverhead = 128

// shrinkRing: an emptied ring longer than this is given back.
const shrinkRing = 4096

// frameCost is what a read-ahead frame counts against readAheadBytes.
func frameCost(p []byte) int64 { return int64(cap(p)) + frameOverhead }

// maxPooledFrame: frame buffers up to this size are reused.
const maxPooledFrame = 1 << 20

// readAhead holds the frames read from a connection and not yet
// processed, in order: a ring that starts small and doubles as a backlog
// forms (a starved Store goroutine, queries holding the Store), bounded by
// readAheadBytes. The reading goroutine waits when the bound is reached;
// the socket then fills and the producer's bounded queue takes the rest
// (it drops the oldest for this client and says so with a GAP, counted as
// missed). Processed frames' buffers come back to a pool for the next
// reads.
type readAhead struct {
	mu     sync.Mutex
	ring   []readFrame
	h, n   int   // first queued frame, number queued
	held   int64 // cost of the queued frames and of the one being processed
	peak   int64 // the most held at once
	max    int64
	pool   [][]byte
	pooled int64 // cap of the buffers in pool
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

// buffer returns an idle frame buffer to read the next frame into (nil:
// none, the reader allocates one of the frame's size).
func (ra *readAhead) buffer() []byte {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	k := len(ra.pool)
	if k == 0 {
		return nil
	}
	b := ra.pool[k-1]
	ra.pool[k-1] = nil
	ra.pool = ra.pool[:k-1]
	ra.pooled -= int64(cap(b))
	return b
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

// done gives back a processed frame: its cost, and its buffer to the pool
// (nothing keeps a frame's bytes once processed).
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
	if c := int64(cap(f.p)); c > 0 && c <= maxPooledFrame && ra.pooled+c <= readAheadPool() {
		ra.pool = append(ra.pool, f.p[:0])
		ra.pooled += c
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
