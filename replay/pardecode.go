package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
)

// The parallel decode of `npumon stats` (StatsFile): the decoder runs
// through the file as it always does, and helper goroutines decode
// chunks of the big trace list ahead of it, which the decoder then takes
// over instead of decoding them itself.
//
// Nothing is pre-scanned. Once the decoder is inside a trace list (at a
// batch's MARK, the list on top of its stack) it copies the memo values a
// trace reads and cannot re-create — strings, scalars, frame dicts — and
// cuts the rest of the file into chunks: each begins at the first batch
// boundary (APPENDS, MARK, EMPTY_DICT, MEMOIZE, MARK: an entry dict
// opening a batch; the dict's MEMOIZE where the pickler memoizes) at or
// after an even step through the file. A helper claims the farthest free
// chunk within a few ahead of the decoder, and the decoder decodes the
// free chunks it meets itself, so each side takes a share as fast as it
// goes and the results waiting in memory stay bounded. As the decoder
// gets past chunks it copies the values it stored there too, for the
// chunks claimed from then on.
//
// A helper decodes a chunk with a decoder of its own whose memo holds the
// copied values at their indexes; the chunk's own memo stores are counted
// from the copy's count K, since the real count at the chunk's start is
// not known until the decoder gets there (protocol 4 numbers the memo by
// counting MEMOIZEs). A reference to K or above — or to a value not
// copied — cannot be read, so it becomes a placeholder: a stack id that
// stands for "the frames list at memo index n". Where a placeholder ends
// up as an entry's frames (a free shares its request's list; an entry
// shares a list of the segments) it is resolved when the decoder takes
// the chunk over; anywhere else the decode fails (a key, an action, a
// frame must be known), and so does any BINPUT. The helper stops where the
// next chunk begins or where its list ends.
//
// When the decoder reaches a helper's chunk exactly at its MARK, with a
// trace list on top of its stack and nothing pending, it waits for the
// helper rather than decode the chunk again — at most as long as it would
// take itself, after which it decodes the chunk and stops the helpers
// (they are not getting a core of their own) — checks everything the
// helper assumed — no memo value rewritten since the copy, every copied
// frame dict unchanged, every placeholder a frames list (one the decoder
// stored before the chunk, or one the chunk stored before the reference),
// the helper ending where it should with its stack as it began, the
// decoder's stack and MARKs beneath it no deeper than the helper kept
// free (parSlack: its depth limits fail where the decoder's would) — and
// takes the chunk over: the chunk's stacks interned in the order the
// helper met them (so every id is the one a sequential decode gives), its
// memo stores copied to the real indexes, its entries handed to the fold
// in order, its reader moved past the chunk. Anything else and the
// decoder decodes the chunk itself. A chunk the decoder goes by (its start
// inside a string: a false boundary) or will not wait for, its result is
// let go of. A decode that fails is decoded again,
// sequentially, so errors (text, offset) are the sequential decoder's.
//
// What the helper's chunks do not give the model: the entries' texts
// (compile_context, user_metadata; the stats fold reads neither).

// Parallel decode settings: the smallest file it starts for and the bytes
// of a chunk. Variables so tests can cut small files into many chunks.
var (
	parMinSize    int64 = 16 << 20
	parChunkBytes int64 = 4 << 20
	// parMaxHelpers caps the helpers (GOMAXPROCS-1 otherwise): the
	// decoder takes every helper chunk over itself, which bounds the gain.
	parMaxHelpers = 16
	// parAwait scales how long the decoder waits for a helper's chunk
	// against its own pace (tests: next to nothing, so it decodes them).
	parAwait = 1.0
	// parWindow is how many chunks ahead of the decoder, per helper, the
	// helpers may claim: their results wait in memory until taken.
	parWindow = 3
	// parSync makes the decoder wait for a helper to claim each helper
	// chunk (tests: every chunk a helper can take is taken).
	parSync = false
	// parMerged counts chunks taken over (tests).
	parMerged atomic.Int64
	// parCoreFree reports whether the host has a core for the helper.
	parCoreFree = coreFree
	// parClosed, if set, sees each parallel decode once its helpers are
	// done (tests).
	parClosed func(*parDecode)
)

// phBase is the first placeholder stack id (placeholderStack).
const phBase = 1 << 30

// parSlack is the stack and MARK depth a helper keeps free for what
// encloses its chunk: the decoder takes a chunk over only beneath no more
// than that, so a chunk nested past its limits is the decoder's error.
const parSlack = 256

// parInput is what a parallel decode reads beside the decoder's reader.
type parInput struct {
	ra   io.ReaderAt
	size int64
}

// parInputOf returns r as a parallel decode's input, nil where the decode
// stays sequential: mode does not ask for it (only the stats fold does,
// with more than one P), r is not a file of at least parMinSize bytes
// that can be read at offsets and seeked, or the host has no core free.
// NPUMON_PARDECODE=off keeps it sequential, =on skips the look at the
// host (measurements: docs/cli.md).
func parInputOf(r io.Reader, size int64, mode streamMode) *parInput {
	if mode != streamParDecode && (mode != streamAuto || !mode.parallel() || size < parMinSize) {
		return nil
	}
	ra, ok := r.(io.ReaderAt)
	if _, seeks := r.(io.Seeker); !ok || !seeks || size < 0 {
		return nil
	}
	switch os.Getenv("NPUMON_PARDECODE") {
	case "off":
		return nil
	case "on":
	default:
		if mode == streamAuto && !parCoreFree() {
			return nil
		}
	}
	return &parInput{ra: ra, size: size}
}

// coreFree reports whether the host looks to have a core for a helper:
// no more tasks runnable right now than leave one CPU free beside this
// one (Linux's /proc/loadavg; true where it cannot be read). A snapshot,
// so the helpers also watch their own wait for a CPU (helper).
func coreFree() bool {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return true
	}
	n, _, ok := strings.Cut(f[3], "/")
	running, err := strconv.Atoi(n)
	if !ok || err != nil {
		return true
	}
	// running counts this task, reading the file.
	return running-1 <= runtime.NumCPU()-2
}

// threadSched returns the calling thread's time on a CPU and time waiting
// for one, in ns (Linux's schedstat); false where they cannot be read.
func threadSched() (run, wait int64, ok bool) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, false
	}
	run, err1 := strconv.ParseInt(f[0], 10, 64)
	wait, err2 := strconv.ParseInt(f[1], 10, 64)
	return run, wait, err1 == nil && err2 == nil
}

// Chunk states (parDecode.mu).
const (
	chunkFree    = iota // nobody has it yet
	chunkDecoder        // the decoder decodes it (its own, or one it reached first)
	chunkHelper         // a helper decodes it; done closes when res is set
)

// parChunk is one chunk [x, y) of a trace list (y: the next chunk's x, or
// the file's end).
type parChunk struct {
	x, y   int64
	state  int
	ctx    context.Context // the helper's reader stops once cancelled
	cancel context.CancelFunc
	// The copies when a helper claimed it (imports below k).
	imports []parImport
	k       uint64
	done    chan struct{}
	res     *parResult
	passed  bool // the decoder went by without taking it: a result is dropped (mu)
}

// parImport is a memo value copied for the helpers: what it was (for the
// decoder's check), and a frame dict's content.
type parImport struct {
	i   uint64
	v   val            // scalars and strings; kDict: the decoder's dict and gen (never the helpers')
	fr  snapshot.Frame // kDict: a frame dict's content
	fid bool           // kDict: placed in a frames list before
}

// parPH is a placeholder: a reference to memo index n the helper could
// not read, made when the chunk had stored lref values and interned
// logLen stacks.
type parPH struct {
	n      uint64
	lref   uint64
	logLen int
}

// parSym is a helper decoder's placeholder state.
type parSym struct {
	ph    []parPH
	cache [256]parSymCache
}

type parSymCache struct {
	n  uint64
	id uint32
	ok bool
}

// placeholder returns the stack id standing for memo index n.
func (s *parSym) placeholder(n, lref uint64, logLen int) uint32 {
	c := &s.cache[n&255]
	if c.ok && c.n == n {
		return c.id
	}
	id := uint32(phBase + len(s.ph))
	s.ph = append(s.ph, parPH{n: n, lref: lref, logLen: logLen})
	c.n, c.id, c.ok = n, id, true
	return id
}

// parMap maps a helper's stack ids (of its builder's generation gen) to
// the decoder's; 0: not mapped yet.
type parMap struct {
	gen int
	ids []snapshot.StackID
}

// parResult is a helper's decode of a chunk: copies of everything the
// decoder reads (the helper goes on with the next chunk meanwhile).
type parResult struct {
	end     int64              // where the decoder goes on: y, or where the list ended
	stores  []uint32           // the chunk's memo stores from symK: 0 none, 1 stale (a placed entry), stackSlot|id, else 2+k: vals[k]
	vals    []parImport        // strings, scalars, frame dicts stored
	ph      []parPH            // placeholders: stack id phBase+k is ph[k]
	entries []foldEntry        // the entries' folded fields, in order
	log     []snapshot.StackID // the helper's stack ids the chunk interned, in order
	frames  [][]snapshot.Frame // their frames
	names   []parName          // the helper's names of actions it does not know
	helper  int                // which helper, and its builder's generation: the ids' meaning
	gen     int
	used    int64   // bytes charged
	saw     [9]bool // the schema evidence it saw
}

type parName struct {
	a    snapshot.Action
	name string
}

// parDecode is the decoder's side of the helpers.
type parDecode struct {
	ra    io.ReaderAt
	size  int64
	limit int64

	mu      sync.Mutex
	cond    sync.Cond
	chunks  []*parChunk
	nx      int  // the first chunk the decoder has not passed
	stopped bool // helpers claim nothing more
	alive   int  // helpers running
	wg      sync.WaitGroup
	ctx     context.Context // cancelled by close: a helper's reader stops
	cancel  context.CancelFunc

	// The memo values copied for the helpers, below importK: the decoder
	// appends (mu) as it gets past chunks; a helper reads those there when
	// it claims a chunk.
	imports []parImport
	importK uint64
	dicts   []int // the frame dicts among imports (the decoder's)

	// Fixed once started (before any helper runs).
	started  bool
	rewrites uint64 // the decoder's memo rewrites then
	helpers  int

	// The decoder's.
	ownChunk    *parChunk // the chunk the decoder is decoding itself, since ownAt
	ownAt       time.Time
	nsPerByte   float64  // the decoder's pace on its last chunk
	watch       int64    // the decoder looks at chunk nx once its offset reaches this
	maps        []parMap // per helper: its stack ids → the decoder's
	posArr      []int32  // helper stack id → 1 + its position in the chunk's log
	phRes       []snapshot.StackID
	spare       chan []foldEntry // the chunks' buffers the decoder has emptied, for the helpers
	spareStores chan []uint32
}

func newParDecode(ra io.ReaderAt, size, limit int64) *parDecode {
	p := &parDecode{ra: ra, size: size, limit: limit, spare: make(chan []foldEntry, 4), spareStores: make(chan []uint32, 4)}
	p.cond.L = &p.mu
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// close stops the helpers and waits for them (every way out of a decode).
func (p *parDecode) close() {
	p.stop()
	p.cancel()
	p.wg.Wait()
	if parClosed != nil {
		parClosed(p)
	}
}

// parMark is the decoder's side, at each MARK the run loop reads: it
// starts the helpers once inside a trace list, and at the start of a
// helper's chunk takes the chunk over (true: the reader is now past it).
func (d *decoder) parMark() bool {
	p := d.par
	if !p.started {
		d.parStart()
		return false
	}
	for d.opOff >= p.watch {
		p.mu.Lock()
		if p.nx >= len(p.chunks) {
			p.mu.Unlock()
			p.watch = 1<<63 - 1
			return false
		}
		c := p.chunks[p.nx]
		if d.opOff < c.x {
			p.mu.Unlock()
			p.watch = c.x
			return false
		}
		for parSync && c.state == chunkFree && p.alive > 0 && !p.stopped {
			p.cond.Wait()
		}
		if c.state == chunkFree {
			c.state = chunkDecoder
		}
		state := c.state
		if d.memo.count > p.importK {
			d.publish() // what the decoder stored since, for the next claims
		}
		p.nx++
		p.cond.Broadcast() // helpers waiting for the decoder to move on
		p.mu.Unlock()
		if n := p.nx; n < len(p.chunks) {
			p.watch = p.chunks[n].x
		} else {
			p.watch = 1<<63 - 1
		}
		p.clock(c, state == chunkDecoder)
		if state != chunkHelper {
			continue // the decoder's
		}
		if d.opOff != c.x {
			p.drop(c) // passed: its start was not an opcode of the decoder's
			continue
		}
		// A helper's chunk, exactly where it begins: wait for it rather than
		// decode it again — for as long as decoding it would take the
		// decoder at most. A helper that has not finished by then is not
		// getting a core of its own (its thread may wait on a busy CPU while
		// the decoder's sits idle): the decoder decodes the chunk itself and
		// stops the helpers.
		if !p.await(c) {
			c.cancel()
			p.drop(c)
			p.stop()
			continue
		}
		r := c.res
		c.res = nil
		if r != nil && d.parTake(c, r) {
			parMerged.Add(1)
			return true
		}
	}
	return false
}

// clock notes the decoder passing chunk c's start: the time the chunk
// before took it, if it decoded that one itself, sets its pace.
func (p *parDecode) clock(c *parChunk, own bool) {
	now := time.Now()
	if p.ownChunk != nil && p.ownChunk.y > p.ownChunk.x {
		p.nsPerByte = float64(now.Sub(p.ownAt)) / float64(p.ownChunk.y-p.ownChunk.x)
	}
	p.ownChunk, p.ownAt = nil, now
	if own {
		p.ownChunk = c
	}
}

// await waits for a helper's chunk c, at most as long as the decoder
// would take to decode it (unbounded before its pace is known, and with
// parSync); false if c is not done by then.
func (p *parDecode) await(c *parChunk) bool {
	select {
	case <-c.done:
		return true
	default:
	}
	if parSync || p.nsPerByte == 0 {
		<-c.done
		return true
	}
	t := time.NewTimer(time.Duration(parAwait * p.nsPerByte * float64(c.y-c.x)))
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// drop lets go of helper chunk c's result, now or when the helper is
// done: the decoder has gone by it, and a result kept would hold its
// memory, never charged, to the decode's end.
func (p *parDecode) drop(c *parChunk) {
	p.mu.Lock()
	c.passed, c.res = true, nil
	p.mu.Unlock()
}

// stop tells the helpers to claim nothing more.
func (p *parDecode) stop() {
	p.mu.Lock()
	p.stopped = true
	p.cond.Broadcast()
	p.mu.Unlock()
}

// parStart starts the helpers at the first batch MARK of a trace list:
// copies the memo values chunks may read and cuts the rest of the file
// into chunks. It stays off (started, no chunks) where there is no helper
// to run or too little left to share.
func (d *decoder) parStart() {
	// parMark runs before the MARK is pushed: the list is on top.
	n := len(d.stack)
	if n == 0 {
		return
	}
	t := &d.stack[n-1]
	b := d.b
	if t.k != kList || t.l.kind != lTraces || t.l.listMore == nil || t.l.acc == nil ||
		b.entriesLive != 0 || !b.parFold || b.sink != nil {
		return
	}
	p := d.par
	p.started = true
	helpers := min(runtime.GOMAXPROCS(0)-1, parMaxHelpers)
	if helpers < 1 {
		return
	}
	// The values to copy: every live string, scalar and frame dict.
	m := &d.memo
	for r := uint32(1); r < m.nrows; r++ {
		row := m.row(r)
		if row.slot == freeRow {
			continue
		}
		if sl := m.slot(uint64(row.slot)); sl == nil || *sl != r+1 {
			continue
		}
		if !p.addImport(uint64(row.slot), &row.v) {
			return // a shape the helpers would copy too much for
		}
	}
	p.importK, p.rewrites = m.count, m.rewrites
	// The chunks: the first batch boundary at or after every step.
	step := max(parChunkBytes, 1)
	var xs []int64
	buf := make([]byte, 64<<10)
	for g := d.opOff + min(step, 1<<20); g < p.size; {
		// A batch is under 1 MiB: not finding one that far, the trace has
		// ended (or the file is not a trace there).
		span := max(step, 1<<20)
		x := syncBatch(p.ra, g, min(g+span, p.size), p.size, buf)
		if x < 0 {
			g += span
			continue
		}
		xs = append(xs, x)
		g = max(g+step, x+1)
	}
	for k, x := range xs {
		c := &parChunk{x: x, y: p.size, done: make(chan struct{})}
		if k+1 < len(xs) {
			c.y = xs[k+1]
		}
		p.chunks = append(p.chunks, c)
	}
	helpers = min(helpers, max(len(p.chunks)/2, min(len(p.chunks), 1)))
	if helpers == 0 {
		return
	}
	p.watch = p.chunks[0].x
	p.helpers = helpers
	p.alive = helpers
	p.wg.Add(helpers)
	p.maps = make([]parMap, helpers)
	for hi := range helpers {
		go func() {
			defer crash.Recover()
			defer p.wg.Done()
			// Labelled, so a CPU profile tells the helpers' share from the
			// decoder's (BENCHMARKS.md).
			pprof.Do(context.Background(), pprof.Labels("replay", "pardecode-helper"), func(context.Context) { p.helper(hi) })
		}()
	}
}

// maxImports caps the values copied for the helpers: past it, chunks
// that read newer values fail (the decoder decodes them).
const maxImports = 1 << 16

// addImport adds memo value v at index i to the copies, if of a kind a
// helper may read; false once there are maxImports.
func (p *parDecode) addImport(i uint64, v *val) bool {
	im := parImport{i: i}
	switch v.k {
	case kNone, kBool, kInt, kUint, kFloat, kStr, kBytes, kPair, kTuple:
		im.v = *v
	case kDict:
		if v.d.gen != v.gen || v.d.kind != dFrame {
			return true
		}
		im.v = val{k: kDict, d: v.d, gen: v.gen}
		im.fr, im.fid = *v.d.fr, v.d.fid != 0
		p.dicts = append(p.dicts, len(p.imports))
	default:
		return true
	}
	if len(p.imports) >= maxImports {
		return false
	}
	p.imports = append(p.imports, im)
	return true
}

// publish copies the values the decoder stored from importK up (it
// decoded them itself), for chunks claimed from now on; the caller holds
// mu.
func (d *decoder) publish() {
	p, m := d.par, &d.memo
	if m.rewrites != p.rewrites || len(p.imports) >= maxImports {
		return // chunks fail the check anyway, or would read past the cap
	}
	for i := p.importK; i < m.count; i++ {
		sl := m.slot(i)
		if sl == nil || *sl == 0 || *sl&stackSlot != 0 {
			continue
		}
		row := m.row(*sl - 1)
		if row.slot != uint32(i) {
			continue
		}
		if !p.addImport(i, &row.v) {
			break
		}
	}
	p.importK = m.count
}

// syncBatch returns the offset of the first batch boundary's MARK in [from,
// to) — APPENDS, MARK, EMPTY_DICT, MEMOIZE, MARK, FRAMEs anywhere between —
// or -1. A plan, never trusted: a chunk is taken over only where the
// decoder itself reads that MARK.
func syncBatch(ra io.ReaderAt, from, to, size int64, buf []byte) int64 {
	const tail = 64 // the pattern's longest: five opcodes and four FRAMEs
	for off := from; off < to; off += int64(len(buf) - tail) {
		n, _ := ra.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		p := buf[:n]
		for i := 0; i < len(p); {
			j := bytes.IndexByte(p[i:], opAppends)
			if j < 0 || off+int64(i+j) >= to {
				break
			}
			i += j + 1
			if x, ok := matchBatch(p, i); ok {
				return off + int64(x)
			}
		}
		if n < len(buf) {
			break
		}
	}
	return -1
}

// matchBatch reports whether p[i:] is MARK, EMPTY_DICT, MEMOIZE (a
// pickler that memoizes the dicts), MARK, FRAMEs between, and where the
// first MARK is.
func matchBatch(p []byte, i int) (int, bool) {
	want := [...]byte{opMark, opEmptyDict, opMemoize, opMark}
	x := -1
	for k, w := range want {
		for i < len(p) && p[i] == opFrame {
			i += 9
		}
		if i >= len(p) {
			return 0, false
		}
		if p[i] != w {
			if w == opMemoize {
				continue // not memoized: the next opcode is the MARK
			}
			return 0, false
		}
		if k == 0 {
			x = i
		}
		i++
	}
	return x, true
}

// parHelper is one helper's decoder state, kept from chunk to chunk.
type parHelper struct {
	p    *parDecode
	idx  int // which helper
	gen  int // its builder's generation (reset)
	sym  parSym
	b    *builder
	memo memo
	rows uint32 // the memo's rows after the copies
	k    uint64 // the copies' count: the chunk's own stores start there
	nimp int    // imports copied
	buf  []byte
	ok   bool // b and memo hold the copy and nothing a failed chunk left
}

// helper claims chunks and decodes them until none is left.
func (p *parDecode) helper(idx int) {
	// On one thread, so that thread's scheduler statistics are the helper's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer func() {
		p.mu.Lock()
		p.alive--
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	h := &parHelper{p: p, idx: idx}
	for {
		c := p.claim()
		if c == nil {
			return
		}
		run0, wait0, known := threadSched()
		r := h.decode(c)
		p.mu.Lock()
		if !c.passed {
			c.res = r
		}
		p.mu.Unlock()
		c.cancel()
		close(c.done)
		// A helper that waited for a CPU half the time it wanted one has no
		// core of its own: it and the decoder take turns on one, so its work
		// only adds to the wall. (Busy cores need not show in the load
		// average or in nice: with autogroup scheduling, a process of another
		// session gets its group's full share whatever its nice.)
		if run1, wait1, ok := threadSched(); known && ok && !parSync && wait1-wait0 > run1-run0 {
			return
		}
	}
}

// claim returns the chunk a helper decodes next: the farthest free one
// within parWindow chunks past the one the decoder reaches next (the
// decoder decodes the free chunks it meets itself, so each side takes a
// share as fast as it goes, and the results waiting stay bounded). It
// waits while only chunks farther ahead are free; nil when none is left
// or the decode is over. With parSync, the nearest free chunk, the one
// the decoder waits at included.
func (p *parDecode) claim() *parChunk {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.stopped {
			return nil
		}
		lo := p.nx + 1
		if parSync {
			lo = p.nx
		}
		hi := min(p.nx+parWindow*p.helpers, len(p.chunks)-1)
		var c *parChunk
		if parSync {
			for k := lo; k <= hi && c == nil; k++ {
				if p.chunks[k].state == chunkFree {
					c = p.chunks[k]
				}
			}
		} else {
			for k := hi; k >= lo && c == nil; k-- {
				if p.chunks[k].state == chunkFree {
					c = p.chunks[k]
				}
			}
		}
		if c != nil {
			c.state = chunkHelper
			c.imports, c.k = p.imports, p.importK
			c.ctx, c.cancel = context.WithCancel(p.ctx)
			p.cond.Broadcast() // a decoder waiting for the claim (parSync)
			return c
		}
		if hi+1 >= len(p.chunks) {
			return nil
		}
		p.cond.Wait()
	}
}

// decode decodes chunk c on the helper's goroutine.
func (h *parHelper) decode(c *parChunk) *parResult {
	p := h.p
	if !h.ok {
		h.reset()
	}
	if !h.load(c) {
		h.ok = false
		return nil
	}
	h.ok = false // until the chunk succeeds
	b := h.b
	b.used, b.overErr = 0, nil
	b.entryQ, b.entriesLive = b.entryQ[:0], 0
	b.sawHistory, b.sawNoAddr, b.sawWorkspace, b.sawNPUConf, b.sawCUDAConf = false, false, false, false, false
	b.sawTime, b.sawSettings, b.sawStream, b.sawStreamZero = false, false, false, false
	b.stackLog = b.stackLog[:0]
	n0 := b.stacks.Len()
	select {
	case b.collect = <-p.spare:
	default:
		b.collect = make([]foldEntry, 0, max(1024, (c.y-c.x)/64))
	}
	in := &byteReader{r: io.NewSectionReader(p.ra, c.x, c.y-c.x), buf: h.buf, total: p.size, base: c.x, ctx: c.ctx}
	if in.buf == nil {
		in.buf = make([]byte, readChunk)
		h.buf = in.buf
	}
	w := &decoder{in: in, b: b, memo: h.memo, sym: &h.sym, symK: h.k, slack: parSlack}
	h.sym.ph = h.sym.ph[:0]
	h.sym.cache = [256]parSymCache{}
	b.memo = &w.memo
	defer func() { h.memo = w.memo }() // its pages, for the next chunk
	l := &list{}
	l.setKind(lTraces)
	w.stack = append(w.stack, val{k: kList, l: l})
	_, err := w.run()
	defer func() {
		for _, id := range b.stackLog {
			b.stackPos[id] = 0 // the log positions, for the next chunk
		}
	}()
	// The chunk ends where the next opcode would be read at y, or where its
	// list ends; with the stack as it began and nothing pending.
	if !(errors.Is(err, ErrTruncated) && in.err == nil && w.opOff == c.y || err == errListEnd) ||
		len(w.stack) != 1 || w.stack[0].k != kList || w.stack[0].l != l || len(w.marks) != 0 ||
		b.entriesLive != 0 || b.overErr != nil || b.table.Len() > 64 {
		return nil
	}
	// Every stack the chunk made is in the log (forward_frames intern
	// without it): the decoder interns the log, in order.
	nl := 0
	for _, id := range b.stackLog {
		if int(id) >= n0 {
			nl++
		}
	}
	if nl != b.stacks.Len()-n0 {
		return nil
	}
	r := &parResult{helper: h.idx, gen: h.gen, end: w.opOff, ph: append([]parPH(nil), h.sym.ph...), entries: b.collect, used: b.used,
		saw: [9]bool{b.sawHistory, b.sawNoAddr, b.sawWorkspace, b.sawNPUConf, b.sawCUDAConf, b.sawTime, b.sawSettings, b.sawStream, b.sawStreamZero}}
	b.collect = nil
	// Every memo store of the chunk, if one the decoder can take.
	ns := int(w.memo.count - h.k)
	select {
	case r.stores = <-p.spareStores:
	default:
	}
	if cap(r.stores) < ns {
		r.stores = make([]uint32, ns)
	}
	r.stores = r.stores[:ns]
	clear(r.stores)
	for j := range r.stores {
		i := h.k + uint64(j)
		sl := w.memo.slot(i)
		if sl == nil || *sl == 0 {
			continue
		}
		if s := *sl; s&stackSlot != 0 {
			if id := s &^ stackSlot; id != 0 && (id >= phBase || int(id) >= len(b.stackPos) || b.stackPos[id] == 0) {
				return nil // not a stack of the chunk's
			}
			r.stores[j] = s
			continue
		}
		row := w.memo.row(*sl - 1)
		if row.slot != uint32(i) || row.v.k == kDict && row.v.d.gen != row.v.gen {
			r.stores[j] = 1 // a placed entry, or a released row: stale for the decoder too
			continue
		}
		v := row.v
		im := parImport{v: v}
		switch v.k {
		case kList, kEntry, kMark, kStack:
			return nil
		case kDict:
			if v.d.kind != dFrame {
				return nil
			}
			im.v = val{k: kDict}
			im.fr, im.fid = *v.d.fr, v.d.fid != 0
		}
		r.stores[j] = uint32(2 + len(r.vals))
		r.vals = append(r.vals, im)
	}
	r.log = append([]snapshot.StackID(nil), b.stackLog...)
	all := b.stacks.Stacks()
	r.frames = make([][]snapshot.Frame, len(r.log))
	for k, id := range r.log {
		r.frames[k] = all[id]
	}
	for a := range 256 {
		if act := snapshot.Action(a); !act.Known() && act != snapshot.ActionOther {
			if name := b.table.Name(act); name != "other" {
				r.names = append(r.names, parName{act, name})
			}
		}
	}
	h.ok = true
	return r
}

// reset makes the helper's builder and memo afresh.
func (h *parHelper) reset() {
	p := h.p
	b := newBuilder()
	b.stream = true
	b.total, b.limit = p.size, p.limit
	b.stackPos = []int32{}
	h.b, h.memo, h.rows, h.k, h.nimp = b, newMemo(), 1, 0, 0
	h.gen++
	h.b.memo = &h.memo
}

// load empties the memo of the last chunk's stores and copies in the
// values published since.
func (h *parHelper) load(c *parChunk) bool {
	m, b := &h.memo, h.b
	m.truncate(h.k, h.rows)
	for _, im := range c.imports[h.nimp:] {
		v := im.v
		if v.k == kDict {
			v = b.newDict()
			_ = b.decide(v.d, dFrame) // a new dict: no pairs wait
			*v.d.fr = im.fr
			if im.fid {
				b.frameID(v.d)
			}
		}
		if m.put(im.i, v, 1<<62) != nil {
			return false
		}
	}
	_ = m.takeAlloc()
	h.nimp, h.k, h.rows = len(c.imports), c.k, m.nrows
	m.count = c.k
	c.imports = nil
	return true
}

// errSymPut fails a helper's chunk at a memo store by index: its indexes
// are not the real ones.
var errSymPut = errors.New("a memo store by index in a helper's chunk")

// errListEnd ends a helper's chunk where its trace list ends.
var errListEnd = errors.New("the chunk's list ends")

// symListEnd reports, after an APPENDS that emptied a helper's marks,
// whether its list ends here: the next opcode (FRAMEs aside) is not the
// MARK of another batch. At the chunk's end it reports false, and the
// next read ends the chunk.
func (d *decoder) symListEnd() bool {
	in := d.in
	for {
		if !in.fill(1) {
			return false
		}
		switch in.buf[in.pos] {
		case opMark:
			return false
		case opFrame:
			if !in.fill(9) {
				return false
			}
			if in.buf[in.pos] == opFrame { // still a FRAME after the refill
				in.pos += 9
				continue
			}
		default:
			d.opOff = in.offset()
			return true
		}
	}
}

// symRef is memoRef for a helper: a copied value, or a placeholder.
func (d *decoder) symRef(i uint64) *val {
	if i < d.symK {
		if v := d.memoRefLive(i); v != nil {
			return v
		}
	}
	d.fastStack = val{k: kStack, n: uint64(d.sym.placeholder(i, d.memo.count-d.symK, len(d.b.stackLog)))}
	return &d.fastStack
}

// symGet is get for a helper: a copied value, or a placeholder.
func (d *decoder) symGet(i uint64) error {
	if i < d.symK {
		if v, err := d.memo.get(i); err == nil {
			return d.push(v)
		}
	}
	return d.push(val{k: kStack, n: uint64(d.sym.placeholder(i, d.memo.count-d.symK, len(d.b.stackLog)))})
}

// logStack records a stack id a helper's chunk interned, once, in order.
func (b *builder) logStack(id snapshot.StackID) {
	for int(id) >= len(b.stackPos) {
		b.stackPos = append(b.stackPos, 0)
	}
	if b.stackPos[id] == 0 {
		b.stackLog = append(b.stackLog, id)
		b.stackPos[id] = int32(len(b.stackLog))
	}
}

// parTake takes a helper's chunk over, at its first MARK, if every
// assumption of the helper's decode holds; false leaves the decoder as it
// was.
func (d *decoder) parTake(c *parChunk, r *parResult) bool {
	b, p := d.b, d.par
	if len(d.stack) == 0 || b.entriesLive != 0 || b.overErr != nil ||
		d.memo.rewrites != p.rewrites || !b.parFold || b.sink != nil ||
		len(d.stack)-1 > parSlack || len(d.marks) > parSlack {
		return false
	}
	t := &d.stack[len(d.stack)-1]
	if t.k != kList || t.l.kind != lTraces || t.l.listMore == nil || t.l.acc == nil {
		return false
	}
	// Far from the budget: the helper's charges stand in for the ones the
	// decoder would have made, so the decode fails where it would have.
	if b.used+r.used > b.limit/2 {
		return false
	}
	// The frame dicts copied are as they were (strings and scalars are,
	// with no memo value rewritten).
	for _, j := range p.dicts {
		im := &p.imports[j]
		v := d.memoRefLive(im.i)
		if v == nil || v.k != kDict || v.d != im.v.d || v.gen != im.v.gen || v.d.gen != v.gen || v.d.kind != dFrame || *v.d.fr != im.fr {
			return false
		}
	}
	// The log's positions, by the helper's stack id.
	pos := p.posArr
	for _, id := range r.log {
		for int(id) >= len(pos) {
			pos = append(pos, 0)
		}
	}
	p.posArr = pos
	for k, id := range r.log {
		pos[id] = int32(k + 1)
	}
	defer func() {
		for _, id := range r.log {
			pos[id] = 0
		}
	}()
	// The placeholders: each a frames list, stored before the chunk, or by
	// the chunk before the reference and interned by then.
	T := d.memo.count
	res := p.phRes[:0]
	for _, h := range r.ph {
		if h.n < T {
			sl := d.memo.slot(h.n)
			if sl == nil || *sl&stackSlot == 0 {
				return false
			}
			res = append(res, snapshot.StackID(*sl&^stackSlot))
			continue
		}
		j := h.n - T
		if j >= h.lref || j >= uint64(len(r.stores)) || r.stores[j]&stackSlot == 0 {
			return false
		}
		id := snapshot.StackID(r.stores[j] &^ stackSlot)
		if id != snapshot.NoStack && int(pos[id]) > h.logLen {
			return false
		}
		res = append(res, -1-id) // mapped once the log is interned
	}
	p.phRes = res
	// The indexes the chunk stores at are in range (the offsets bound
	// them: a MEMOIZE is a byte).
	if L := uint64(len(r.stores)); T+L > maxMemo || int64(T+L) > r.end {
		return false
	}
	if !d.in.seekTo(r.end) {
		return false
	}
	// The chunk's stacks, interned in the order it met them: the ids a
	// sequential decode gives.
	// A helper's stack ids keep their content while its builder lives
	// (gen), and an id of the decoder's its content: one mapped for an
	// earlier chunk is not interned again.
	hm := &p.maps[r.helper]
	if hm.gen != r.gen {
		hm.gen, hm.ids = r.gen, hm.ids[:0]
	}
	mp := hm.ids
	if len(mp) == 0 {
		mp = append(mp, snapshot.NoStack)
	}
	for _, id := range r.log {
		for int(id) >= len(mp) {
			mp = append(mp, 0)
		}
	}
	hm.ids = mp
	for k, id := range r.log {
		if mp[id] == 0 {
			mp[id] = b.stacks.Intern(r.frames[k])
		}
	}
	for k, s := range res {
		if s < 0 {
			res[k] = mp[-1-s]
		}
	}
	// The chunk's memo stores, at their real indexes: slots no store has
	// reached yet (all from the count on), written a page at a time.
	for j := 0; j < len(r.stores); {
		i := T + uint64(j)
		pg := d.memo.page(i >> memoShift)
		o := int(i & (memoPage - 1))
		n := min(memoPage-o, len(r.stores)-j)
		dst := pg[o : o+n]
		for k, s := range r.stores[j : j+n] {
			switch {
			case s == 0:
			case s&stackSlot != 0:
				dst[k] = stackSlot | uint32(mp[s&^stackSlot])
			case s == 1:
				dst[k] = placedRow + 1
			default:
				im := &r.vals[s-2]
				v := im.v
				if v.k == kDict {
					v = b.newDict()
					_ = b.decide(v.d, dFrame)
					*v.d.fr = im.fr
					if im.fid {
						b.frameID(v.d)
					}
				}
				_ = d.memo.put(i+uint64(k), v, r.end) // checked above
			}
		}
		j += n
	}
	b.charge(d.memo.takeAlloc())
	d.memo.count = T + uint64(len(r.stores))
	// The entries, to the fold in trace order; actions the helper did not
	// know named in the order the chunk met them.
	var acts [256]snapshot.Action
	for a := range acts {
		acts[a] = snapshot.Action(a)
	}
	var named [256]bool
	for _, n := range r.names {
		named[n.a] = true
	}
	l := t.l
	if b.fold == nil {
		b.fold = newFoldPipe()
	}
	es := r.entries
	for k := range es {
		e := &es[k]
		if a := e.action; named[a] {
			named[a] = false
			for _, n := range r.names {
				if n.a == a {
					acts[a] = b.action(n.name)
				}
			}
		}
		e.action = acts[e.action]
		if e.frames >= phBase {
			e.frames = res[e.frames-phBase]
		} else {
			e.frames = mp[e.frames]
		}
	}
	l.streamed += len(es)
	spare := p.spare
	b.fold.handOver(l.acc, es, func(es []foldEntry) {
		select {
		case spare <- es[:0]:
		default:
		}
	})
	select {
	case p.spareStores <- r.stores[:0]:
	default:
	}
	f := &r.saw
	b.sawHistory = b.sawHistory || f[0]
	b.sawNoAddr = b.sawNoAddr || f[1]
	b.sawWorkspace = b.sawWorkspace || f[2]
	b.sawNPUConf = b.sawNPUConf || f[3]
	b.sawCUDAConf = b.sawCUDAConf || f[4]
	b.sawTime = b.sawTime || f[5]
	b.sawSettings = b.sawSettings || f[6]
	b.sawStream = b.sawStream || f[7]
	b.sawStreamZero = b.sawStreamZero || f[8]
	b.charge(r.used)
	return true
}
