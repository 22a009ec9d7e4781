package replay

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
)

// The parallel decode of `npumon stats` (StatsFile): the decoder runs
// through the file as it always does, and a helper goroutine decodes
// stretches of the big trace list ahead of it, which the decoder then
// takes over instead of decoding them itself.
//
// The helper pre-scans the opcodes (parscan.go) to find the trace list's
// batches and the memo count at each (protocol 4 numbers the memo by
// counting MEMOIZEs), picks a run of whole batches [x, y) far enough ahead
// of the decoder, and asks the decoder for the memo values that run reads
// from before x (the keys, action strings, frame dicts and shared frames
// lists: the pre-scan lists their indexes). The decoder copies them at its
// next MARK, once it has stored them all. The helper decodes the run with
// a decoder of its own, primed with those values, its memo counting from
// the run's first index, its stack holding a trace list, and collects the
// entries' folded fields. When the decoder reaches x it checks that
// everything the helper assumed holds — the trace list is on top of its
// stack with no entry pending, its memo count is the one the pre-scan gave,
// every value it handed over is still the same — and that the helper ended
// exactly at y with its stack as it began; then it takes the run over: the
// helper's new stacks and action names interned in the order the helper
// met them (so every id is the one a sequential decode gives), its memo
// stores copied (so later references see them), its entries handed to the
// fold in order, and its reader moved on to y. Anything else and the
// decoder decodes the run itself. A decode that fails is decoded again,
// sequentially, so errors (text, offset) are the sequential decoder's.
//
// What the helper's runs do not give the model: the entries' texts
// (compile_context, user_metadata; the stats fold reads neither).

// Parallel decode settings: the smallest file it starts for, the bytes a
// helper run takes, and how far ahead of the decoder a run starts.
// Variables so tests can make runs of single batches in small files.
var (
	parMinSize    int64 = 16 << 20
	parChunkBytes int64 = 4 << 20
	parGapBytes   int64 = 7 << 20
	// parSync makes the decoder wait at each MARK for the helper's next
	// request (tests: every run the helper can take is taken).
	parSync = false
	// parMerged counts runs taken over (tests).
	parMerged atomic.Int64
	// parMaxLate is how many runs in a row the helper may still be
	// decoding when the decoder reaches them before it is stopped.
	parMaxLate = 3
	// parCoreFree reports whether the host has a core for the helper.
	parCoreFree = coreFree
)

// parInput is what a parallel decode reads beside the decoder's reader.
type parInput struct {
	ra   io.ReaderAt
	size int64
}

// parInputOf returns r as a parallel decode's input, nil where the decode
// stays sequential: mode does not ask for it (only the stats fold does,
// with more than one P), or r is not a file of at least parMinSize bytes
// that can be read at offsets and seeked.
func parInputOf(r io.Reader, size int64, mode streamMode) *parInput {
	if mode != streamParDecode && (mode != streamAuto || !mode.parallel() || size < parMinSize) {
		return nil
	}
	ra, ok := r.(io.ReaderAt)
	if _, seeks := r.(io.Seeker); !ok || !seeks || size < 0 {
		return nil
	}
	if mode == streamAuto && !parCoreFree() {
		return nil
	}
	return &parInput{ra: ra, size: size}
}

// coreFree reports whether the host looks to have a core for the helper:
// no more tasks runnable right now than leave one CPU free beside this
// one (Linux's /proc/loadavg; true where it cannot be read). A snapshot,
// so the helper also watches its own wait for a CPU (run).
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

// parDecode is the decoder's side of the helper: the decoder's goroutine
// owns pending and cur; off and count are what it publishes.
type parDecode struct {
	ra    io.ReaderAt
	size  int64
	limit int64 // the helper decoder's budget

	req  chan *parChunk
	stop chan struct{}
	done chan struct{}

	off   atomic.Int64  // the decoder's offset at its last MARK
	count atomic.Uint64 // its memo count then

	buf   []byte           // the helper's read buffer
	spare chan []foldEntry // entry buffers the decoder has emptied, back to the helper
	memo  memo             // the helper's memo, emptied for each run
	hb    *builder         // the helper's builder (see decodeRun)
	gen   int              // its generation
	prev  *parChunk        // the run it decoded last

	// The decoder's: the helper's stack ids of generation mapGen mapped
	// onto its own (stackMap[id]).
	mapGen   int
	stackMap []snapshot.StackID

	pending  *parChunk // requested, not answered yet
	late     int       // runs in a row the helper had not finished when the decoder reached them
	quitting bool      // stop is closed
	cur      *parChunk // answered: to take over at cur.x
}

// parChunk is one run of batches [x, y) of the trace list.
type parChunk struct {
	x, y    int64
	c0, c1  uint64
	taken   bool     // the decoder took it over (set before it answers the next request)
	refs    []uint64 // memo indexes below c0 the run reads
	maxRef  uint64
	imports []parImport   // the decoder's answer
	answer  chan bool     // false: decoded by the decoder (too late, or values the helper cannot take)
	done    chan struct{} // closed by the helper once res is set
	res     *parResult
}

// parImport is a memo value handed to the helper: a copy it may read
// (strings, scalars, a stack's frames, a frame dict's content) and, for
// the decoder's check, what it was.
type parImport struct {
	i      uint64
	v      val              // scalars and strings; kStack: n is the decoder's id; kDict: d and gen (the decoder's, not for the helper)
	frames []snapshot.Frame // kStack
	fr     snapshot.Frame   // kDict: a frame dict's content
	fid    bool             // kDict: placed in a frames list before
}

// parResult is the helper's decode of a run.
type parResult struct {
	ok      bool
	w       *decoder
	gen     int // the generation of the helper's builder
	entries []foldEntry
}

func newParDecode(ra io.ReaderAt, size, limit int64) *parDecode {
	p := &parDecode{ra: ra, size: size, limit: limit,
		req: make(chan *parChunk, 1), stop: make(chan struct{}), done: make(chan struct{}),
		spare: make(chan []foldEntry, 2)}
	go func() {
		defer crash.Recover()
		defer close(p.done)
		// Labelled, so a CPU profile tells the helper's share from the
		// decoder's (BENCHMARKS.md).
		pprof.Do(context.Background(), pprof.Labels("replay", "pardecode-helper"), func(context.Context) { p.run() })
	}()
	return p
}

// close stops the helper and waits for it (every way out of a decode).
func (p *parDecode) close() {
	p.quit()
	<-p.done
}

// quit tells the helper to stop (the decoder's goroutine; once).
func (p *parDecode) quit() {
	if !p.quitting {
		p.quitting = true
		close(p.stop)
	}
}

// run is the helper: plan a run, ask for its values, decode it, repeat.
func (p *parDecode) run() {
	// On one thread, so that thread's scheduler statistics are the helper's.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sc := newScanner(p.ra, p.size)
	var carry *scanBatch
	// The end of the run last answered: the decoder jumps over it once it
	// gets there, so the next run starts parGapBytes past it — bytes the
	// decoder decodes itself while the helper decodes that next run.
	// (Planned from the decoder's offset alone, a run began only
	// parGapBytes minus the run in flight ahead of where the decoder would
	// land: the gaps alternated g, parGapBytes−g and one of each pair was
	// too short, so the helper was still decoding it when the decoder got
	// there, and both decoded it.)
	var ahead int64
	var cps []scanPoint // every batch's MARK and memo count, in file order
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		b := carry
		carry = nil
		if b == nil {
			sc.trackFrom = max(p.off.Load(), ahead) + parGapBytes
			if b = sc.next(); b == nil {
				return
			}
		}
		// A run starts far enough ahead of the decoder, and reads nothing the
		// decoder has not stored yet (its answer would come too late to
		// help). Tests (parSync) let the decoder answer when it gets there.
		cps = append(cps, scanPoint{b.mark, b.c0})
		if !b.tracked || b.mark < max(p.off.Load(), ahead)+parGapBytes || (!parSync && len(b.refs) > 0 && !p.readyBy(cps, b.maxRef, b.mark)) {
			continue
		}
		c := &parChunk{x: b.mark, y: b.end, c0: b.c0, c1: b.c1, refs: b.refs, maxRef: b.maxRef,
			answer: make(chan bool, 1), done: make(chan struct{})}
		for c.y-c.x < parChunkBytes {
			n := sc.next()
			if n == nil {
				break
			}
			cps = append(cps, scanPoint{n.mark, n.c0})
			if !n.follows || !n.tracked || n.mark < c.y {
				carry = n
				break
			}
			ext := false
			for _, r := range n.refs {
				if !parSync && r < c.c0 && !p.readyBy(cps, r, c.x) {
					ext = true
					break
				}
			}
			if ext {
				carry = n
				break
			}
			for _, r := range n.refs {
				if r < c.c0 {
					c.refs = append(c.refs, r)
					c.maxRef = max(c.maxRef, r)
				}
			}
			c.y, c.c1 = n.end, n.c1
		}
		slices.Sort(c.refs)
		c.refs = slices.Compact(c.refs)
		select {
		case p.req <- c:
		case <-p.stop:
			return
		}
		select {
		case ok := <-c.answer:
			if !ok {
				continue
			}
		case <-p.stop:
			return
		}
		ahead = c.y
		run0, wait0, known := threadSched()
		c.res = p.decodeRun(c)
		close(c.done)
		// A helper that waited for a CPU a third of the time it wanted one
		// has no core of its own: it and the decoder take turns on one, so
		// its work only adds to the wall. (Busy cores need not show in the
		// load average or in nice: with autogroup scheduling, a process of
		// another session gets its group's full share whatever its nice.)
		if run1, wait1, ok := threadSched(); known && ok && !parSync && (wait1-wait0)*2 > run1-run0 {
			return
		}
	}
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

// scanPoint is where a batch begins and the memo count there.
type scanPoint struct {
	off int64
	c   uint64
}

// readyBy reports whether the decoder will have stored memo index r
// parGapBytes before offset x: stored already, or by the first batch the
// pre-scan met with a higher memo count. A run may read values the decoder
// has yet to store when it plans the run, as long as the decoder answers
// (once it has stored them) with the run still far enough ahead — the
// file's first values (keys, shared strings) are read by every batch, and
// waiting for the decoder to store them before planning at all let it
// decode the file's first run of megabytes alone.
func (p *parDecode) readyBy(cps []scanPoint, r uint64, x int64) bool {
	if r < p.count.Load() {
		return true
	}
	i, _ := slices.BinarySearchFunc(cps, r, func(cp scanPoint, r uint64) int {
		if cp.c > r {
			return 1
		}
		return -1
	})
	return i < len(cps) && cps[i].off+parGapBytes <= x
}

// decodeRun decodes run c with a decoder of its own (the helper's goroutine).
func (p *parDecode) decodeRun(c *parChunk) *parResult {
	// One builder run after run, its tables (stacks, frames, action names,
	// strings) kept: the decoder maps its ids onto its own as they grow.
	// After a run the decoder did not take, or one that failed, the
	// builder may hold what the decoder never saw: a fresh one, a new
	// generation of ids.
	if p.hb == nil || p.prev != nil && !p.prev.taken {
		p.hb = newBuilder()
		p.hb.stream = true
		p.gen++
	}
	p.prev = c
	b := p.hb
	b.used, b.overErr = 0, nil
	// The entries' buffer is one the decoder has emptied, if any: a run
	// leaves no garbage behind for the collector to let the heap grow by.
	select {
	case b.collect = <-p.spare:
	default:
		b.collect = make([]foldEntry, 0, max(1024, (c.y-c.x)/64))
	}
	b.total, b.limit = p.size, p.limit
	in := &byteReader{r: io.NewSectionReader(p.ra, c.x, c.y-c.x), buf: p.buf, total: p.size, base: c.x}
	if in.buf == nil {
		in.buf = make([]byte, readChunk)
		p.buf = in.buf
	}
	w := &decoder{in: in, b: b, memo: p.memo}
	w.memo.reset()
	b.memo = &w.memo
	defer func() { p.memo = w.memo }() // its pages, for the next run
	res := &parResult{w: w, gen: p.gen}
	defer func() {
		if !res.ok {
			p.hb = nil
		}
	}()
	dicts := make([]val, len(c.imports))
	for j := range c.imports {
		im := &c.imports[j]
		switch im.v.k {
		case kStack:
			sl, err := w.memo.claim(im.i, c.x)
			if err != nil {
				return res
			}
			*sl = stackSlot | uint32(b.stacks.Intern(im.frames))
			continue
		case kDict:
			dv := b.newDict()
			_ = b.decide(dv.d, dFrame) // a new dict: no pairs wait
			*dv.d.fr = im.fr
			if im.fid {
				b.frameID(dv.d)
			}
			dicts[j] = dv
			if w.memo.put(im.i, dv, c.x) != nil {
				return res
			}
		default:
			if w.memo.put(im.i, im.v, c.x) != nil {
				return res
			}
		}
	}
	w.memo.count = c.c0
	l := &list{}
	l.setKind(lTraces)
	w.stack = append(w.stack, val{k: kList, l: l})
	_, err := w.run()
	res.entries = b.collect
	// The run ends where the next opcode would be read at y, with the
	// stack as it began and nothing pending.
	if !errors.Is(err, ErrTruncated) || in.err != nil || w.opOff != c.y || len(w.stack) != 1 ||
		w.stack[0].k != kList || w.stack[0].l != l || len(w.marks) != 0 || b.entriesLive != 0 ||
		b.overErr != nil || w.memo.count != c.c1 || b.table.Len() > 64 {
		return res
	}
	// The values handed over are as they were.
	for j, dv := range dicts {
		if d := dv.d; d != nil && (d.kind != dFrame || d.gen != dv.gen || *d.fr != c.imports[j].fr) {
			return res
		}
	}
	// Every memo store of the run is one the decoder can take.
	for i := c.c0; i < c.c1; i++ {
		sl := w.memo.slot(i)
		if sl == nil || *sl == 0 || *sl&stackSlot != 0 {
			continue
		}
		row := w.memo.row(*sl - 1)
		if row.slot != uint32(i) || row.v.k == kDict && row.v.d.gen != row.v.gen {
			continue // a placed entry, or a released row: stale for the decoder too
		}
		switch row.v.k {
		case kList, kEntry, kMark:
			return res
		case kDict:
			if row.v.d.kind != dFrame {
				return res
			}
		}
	}
	res.ok = true
	return res
}

// parMark is the decoder's side, at each MARK the run loop reads: it
// publishes its position, answers the helper's request once it can, and
// at the start of a run the helper decoded takes the run over (true: the
// reader is now past it).
func (d *decoder) parMark() bool {
	p := d.par
	if p.quitting {
		return false
	}
	p.off.Store(d.opOff)
	p.count.Store(d.memo.count)
	if p.pending == nil && p.cur == nil {
		if parSync {
			select {
			case c := <-p.req:
				p.pending = c
			case <-p.done:
			}
		} else {
			select {
			case c := <-p.req:
				p.pending = c
			default:
			}
		}
	}
	if c := p.pending; c != nil {
		switch {
		case d.opOff >= c.x:
			p.pending = nil
			c.answer <- false
		case len(c.refs) == 0 || c.maxRef < d.memo.count:
			p.pending = nil
			if d.parAnswer(c) {
				p.cur = c
				c.answer <- true
			} else {
				c.answer <- false
			}
		}
	}
	if c := p.cur; c != nil && d.opOff >= c.x {
		p.cur = nil
		if !parSync {
			// A helper still decoding the run is one the host gives less
			// time than the decoder (both cores busy): the decoder goes on
			// rather than wait, and after parMaxLate such runs in a row
			// stops the helper, whose work then only adds CPU.
			select {
			case <-c.done:
				p.late = 0
			default:
				if p.late++; p.late >= parMaxLate {
					p.quit()
				}
				return false
			}
		}
		<-c.done
		if d.opOff == c.x && d.parTake(c) {
			parMerged.Add(1)
			return true
		}
	}
	return false
}

// parAnswer copies the values run c reads from before it; false if one
// is not a kind the helper takes.
func (d *decoder) parAnswer(c *parChunk) bool {
	c.imports = make([]parImport, 0, len(c.refs))
	for _, i := range c.refs {
		v := d.memoRef(i)
		if v == nil {
			continue // not stored, or stale: the helper's decode of the reference fails as it would here
		}
		im := parImport{i: i}
		switch v.k {
		case kStack:
			im.v = *v
			im.frames = append([]snapshot.Frame(nil), d.b.stacks.Stacks()[v.n]...)
		case kDict:
			if v.d.kind != dFrame {
				return false
			}
			im.v = val{k: kDict, d: v.d, gen: v.gen}
			im.fr, im.fid = *v.d.fr, v.d.fid != 0
		case kList, kEntry, kMark:
			return false
		default:
			im.v = *v
		}
		c.imports = append(c.imports, im)
	}
	return true
}

// parTake takes the helper's run c over, at its first MARK, if every
// assumption of the helper's decode holds; false leaves the decoder as it
// was.
func (d *decoder) parTake(c *parChunk) bool {
	r, b := c.res, d.b
	if r == nil || !r.ok || len(d.stack) == 0 || b.entriesLive != 0 || b.overErr != nil ||
		d.memo.count != c.c0 || !b.parFold || b.sink != nil {
		return false
	}
	t := &d.stack[len(d.stack)-1]
	if t.k != kList || t.l.kind != lTraces || t.l.listMore == nil || t.l.acc == nil {
		return false
	}
	wb := r.w.b
	// Far from the budget: the helper's charges stand in for the ones the
	// decoder would have made, so the decode fails where it would have.
	if b.used+wb.used > b.limit/2 {
		return false
	}
	for j := range c.imports {
		im := &c.imports[j]
		v := d.memoRef(im.i)
		if v == nil || v.k != im.v.k {
			return false
		}
		switch v.k {
		case kDict:
			if v.d != im.v.d || v.gen != im.gen() || v.d.gen != v.gen || v.d.kind != dFrame || *v.d.fr != im.fr {
				return false
			}
		default:
			if v.n != im.v.n || v.m != im.v.m || v.s != im.v.s {
				return false
			}
		}
	}
	if !d.in.seekTo(c.y) {
		return false
	}
	// Ids in the order the helper met them: the sequential decode's.
	var acts [256]snapshot.Action
	for a := range acts {
		act := snapshot.Action(a)
		acts[a] = act
		if !act.Known() && act != snapshot.ActionOther {
			if name := wb.table.Name(act); name != "other" {
				acts[a] = b.action(name)
			}
		}
	}
	// Every run of this generation before this one was taken over, so the
	// helper's stacks not mapped yet are this run's, met in this order.
	p := d.par
	if p.mapGen != r.gen {
		p.mapGen, p.stackMap = r.gen, p.stackMap[:0]
	}
	local := wb.stacks.Stacks()
	for id := len(p.stackMap); id < len(local); id++ {
		p.stackMap = append(p.stackMap, b.stacks.Intern(local[id])) // id 0: NoStack
	}
	stacks := p.stackMap
	// The run's memo stores, for what comes after it.
	wm := &r.w.memo
	for i := c.c0; i < c.c1; i++ {
		sl := wm.slot(i)
		if sl == nil || *sl == 0 {
			continue
		}
		if s := *sl; s&stackSlot != 0 {
			dst, _ := d.memo.claim(i, c.y) // the helper claimed it
			*dst = stackSlot | uint32(stacks[s&^stackSlot])
			continue
		}
		row := wm.row(*sl - 1)
		if row.slot != uint32(i) || row.v.k == kDict && row.v.d.gen != row.v.gen {
			dst, _ := d.memo.claim(i, c.y)
			*dst = placedRow + 1
			continue
		}
		v := row.v
		if v.k == kDict {
			dv := b.newDict()
			_ = b.decide(dv.d, dFrame)
			*dv.d.fr = *v.d.fr
			if v.d.fid != 0 {
				b.frameID(dv.d)
			}
			v = dv
		}
		_ = d.memo.put(i, v, c.y)
	}
	b.charge(d.memo.takeAlloc())
	d.memo.count = c.c1
	// The entries, to the fold in trace order.
	l := t.l
	if b.fold == nil {
		b.fold = newFoldPipe()
	}
	for _, e := range r.entries {
		e.action, e.frames = acts[e.action], stacks[e.frames]
		*b.fold.slot(l.acc) = e
	}
	l.streamed += len(r.entries)
	c.taken = true
	select {
	case d.par.spare <- r.entries[:0]:
	default:
	}
	b.sawHistory = b.sawHistory || wb.sawHistory
	b.sawNoAddr = b.sawNoAddr || wb.sawNoAddr
	b.sawWorkspace = b.sawWorkspace || wb.sawWorkspace
	b.sawNPUConf = b.sawNPUConf || wb.sawNPUConf
	b.sawCUDAConf = b.sawCUDAConf || wb.sawCUDAConf
	b.sawTime = b.sawTime || wb.sawTime
	b.sawSettings = b.sawSettings || wb.sawSettings
	b.sawStream = b.sawStream || wb.sawStream
	b.sawStreamZero = b.sawStreamZero || wb.sawStreamZero
	b.charge(wb.used)
	return true
}

// gen is the generation of an imported dict.
func (im *parImport) gen() uint32 { return im.v.gen }
