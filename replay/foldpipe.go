package replay

import (
	"runtime"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
)

// streamMode says whether a decode keeps its trace entries or folds them
// (StatsFile), and whether the fold runs beside the decoder.
type streamMode uint8

const (
	noStream        streamMode = iota // entries kept in the model
	streamAuto                        // folded: beside the decoder when there is more than one P, the trace then decoded on two goroutines in a file of parMinSize bytes or more (pardecode.go)
	streamSeq                         // folded by the decoding goroutine itself
	streamPar                         // folded by a second goroutine (tests force it)
	streamParDecode                   // streamPar, and the trace decoded on two goroutines whatever the file's size (tests)
)

// parallel reports whether mode folds in a second goroutine.
func (m streamMode) parallel() bool {
	return m == streamPar || m == streamParDecode || m == streamAuto && runtime.GOMAXPROCS(0) > 1
}

// Pipeline sizes: foldBatches buffers of foldBatchLen entries (the stats
// fold) or sinkBatchLen (a TraceSink) circle between the decoder and the
// consumer, so the pipeline holds at most 4 × 16384 × 40 B = 2.5 MiB, or
// 4 × 4096 × 72 B = 1.1 MiB, however large the file. A sink's batches are
// smaller: each is one write-locked append to a Store that is being read,
// and the first comes sooner. Variables so tests can make the hand-overs
// frequent.
var (
	foldBatchLen = 16384
	sinkBatchLen = 4096
	foldBatches  = 4
)

// pipeBatch is a run of one trace list's entries, in trace order.
type pipeBatch[K comparable, T any] struct {
	key  K
	e    []T
	done func([]T) // a batch handOver made: given its entries back once consumed
}

// foldEntry is the part of a trace entry traceAcc.add reads (action,
// address, size, stream, frames, time): 40 bytes instead of 72, so fewer
// cache lines travel from the decoder's core to the folder's.
type foldEntry struct {
	addr, stream uint64
	size, time   int64
	frames       snapshot.StackID
	action       snapshot.Action
}

// pipe hands a decode's trace entries, in batches, to a goroutine of its
// own while the decoder goes on: the decoder fills a batch (entries of one
// key: a trace list's accumulator, a TraceSink's list number), hands it
// over through full, and takes an empty one from free. One consumer takes
// the batches in the order they were sent, so every key sees its entries
// in trace order. The consumer never fails: decoding errors (and their
// offsets) stay the decoder's alone. The stats fold (foldPipe) and a
// TraceSink (sinkPipe) are its two uses.
type pipe[K comparable, T any] struct {
	full    chan *pipeBatch[K, T]
	free    chan *pipeBatch[K, T]
	done    chan struct{}
	cur     *pipeBatch[K, T]
	made    int          // batches allocated so far (at most foldBatches, made as needed)
	size    int          // entries a batch holds
	consume func(K, []T) // the consumer's work on one batch (its goroutine)
	handing func()       // the decoder's, before a batch is handed over (nil: none)
}

func newPipe[K comparable, T any](size int, consume func(K, []T)) *pipe[K, T] {
	p := &pipe[K, T]{
		size:    size,
		full:    make(chan *pipeBatch[K, T], foldBatches),
		free:    make(chan *pipeBatch[K, T], foldBatches),
		done:    make(chan struct{}),
		consume: consume,
	}
	go func() {
		defer crash.Recover()
		p.run()
	}()
	return p
}

// run is the consumer goroutine.
func (p *pipe[K, T]) run() {
	defer close(p.done)
	for bt := range p.full {
		p.consume(bt.key, bt.e)
		if bt.done != nil {
			bt.done(bt.e)
			continue
		}
		var zero K
		bt.e, bt.key = bt.e[:0], zero
		p.free <- bt
	}
}

// slot returns room for one more entry of key (the decoder's goroutine
// only), starting a batch when the current one is another key's or full.
func (p *pipe[K, T]) slot(key K) *T {
	c := p.cur
	if c == nil || c.key != key || len(c.e) == cap(c.e) {
		p.flush()
		c = p.batch()
		c.key = key
		p.cur = c
	}
	c.e = c.e[:len(c.e)+1]
	return &c.e[len(c.e)-1]
}

// batch returns an empty batch: a recycled one, a new one while fewer
// than foldBatches exist, else the next the consumer gives back.
func (p *pipe[K, T]) batch() *pipeBatch[K, T] {
	select {
	case c := <-p.free:
		return c
	default:
	}
	if p.made < foldBatches {
		p.made++
		return &pipeBatch[K, T]{e: make([]T, 0, p.size)}
	}
	return <-p.free
}

// handOver hands es, entries of key in trace order, to the consumer as a
// batch of their own, after those queued (the decoder's goroutine only):
// the parallel decode's chunks, folded without a copy. done gets them back
// on the consumer's goroutine once consumed.
func (p *pipe[K, T]) handOver(key K, es []T, done func([]T)) {
	p.flush()
	if len(es) == 0 {
		done(es)
		return
	}
	if p.handing != nil {
		p.handing()
	}
	p.full <- &pipeBatch[K, T]{key: key, e: es, done: done}
}

// flush hands the batch being filled to the consumer.
func (p *pipe[K, T]) flush() {
	if c := p.cur; c != nil {
		p.cur = nil
		if len(c.e) > 0 {
			if p.handing != nil {
				p.handing()
			}
			p.full <- c
		} else {
			p.free <- c
		}
	}
}

// wait hands over what is queued and stops the consumer, which has seen
// every entry once it returns. It is called on every way out of a decode,
// errors and cancellation included: what is left is at most foldBatches
// batches.
func (p *pipe[K, T]) wait() {
	p.flush()
	close(p.full)
	<-p.done
}

// foldPipe folds trace entries into their accumulators beside the decoder
// (StatsFile); the accumulators are complete (and the decoder's to read)
// once wait returns. The figures are the same to the bit as the
// sequential fold's.
type foldPipe = pipe[*traceAcc, foldEntry]

func newFoldPipe() *foldPipe {
	return newPipe(foldBatchLen, func(acc *traceAcc, es []foldEntry) {
		var e snapshot.TraceEntry
		for i := range es {
			f := &es[i]
			e.Action, e.Addr, e.Size, e.Stream, e.Frames, e.TimeUS = f.action, f.addr, f.size, f.stream, f.frames, f.time
			acc.add(&e)
		}
	})
}

// foldAdd queues entry e for acc (the decoder's goroutine only).
func foldAdd(p *foldPipe, acc *traceAcc, e *snapshot.TraceEntry) {
	*p.slot(acc) = foldEntry{addr: e.Addr, stream: e.Stream, size: e.Size, time: e.TimeUS, frames: e.Frames, action: e.Action}
}
