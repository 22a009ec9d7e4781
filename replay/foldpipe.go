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
	noStream   streamMode = iota // entries kept in the model
	streamAuto                   // folded: beside the decoder when there is more than one P
	streamSeq                    // folded by the decoding goroutine itself
	streamPar                    // folded by a second goroutine (tests force it)
)

// parallel reports whether mode folds in a second goroutine.
func (m streamMode) parallel() bool {
	return m == streamPar || m == streamAuto && runtime.GOMAXPROCS(0) > 1
}

// Fold pipeline sizes: foldBatches buffers of foldBatchLen entries circle
// between the decoder and the folder, so the pipeline holds at most
// foldBatches × foldBatchLen entries (4 × 16384 × 40 B = 2.5 MiB) however
// large the file. Variables so tests can make the hand-overs frequent.
var (
	foldBatchLen = 16384
	foldBatches  = 4
)

// foldBatch is a run of one trace list's entries, in trace order.
type foldBatch struct {
	acc *traceAcc
	e   []foldEntry
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

// foldPipe folds trace entries into their accumulators on a goroutine of
// its own while the decoder goes on: the decoder fills a batch, hands it
// over through full, and takes an empty one from free. One folder takes
// the batches in the order they were sent, so every accumulator sees its
// entries in trace order, as the sequential fold does, and the figures are
// the same to the bit. The folder never fails: decoding errors (and their
// offsets) stay the decoder's alone.
type foldPipe struct {
	full chan *foldBatch
	free chan *foldBatch
	done chan struct{}
	cur  *foldBatch
	made int // batches allocated so far (at most foldBatches, made as needed)
}

func newFoldPipe() *foldPipe {
	p := &foldPipe{
		full: make(chan *foldBatch, foldBatches),
		free: make(chan *foldBatch, foldBatches),
		done: make(chan struct{}),
	}
	go func() {
		defer crash.Recover()
		p.fold()
	}()
	return p
}

// fold is the folder goroutine.
func (p *foldPipe) fold() {
	defer close(p.done)
	for bt := range p.full {
		acc := bt.acc
		var e snapshot.TraceEntry
		for i := range bt.e {
			f := &bt.e[i]
			e.Action, e.Addr, e.Size, e.Stream, e.Frames, e.TimeUS = f.action, f.addr, f.size, f.stream, f.frames, f.time
			acc.add(&e)
		}
		bt.e, bt.acc = bt.e[:0], nil
		p.free <- bt
	}
}

// add queues entry e for acc (the decoder's goroutine only).
func (p *foldPipe) add(acc *traceAcc, e *snapshot.TraceEntry) {
	c := p.cur
	if c == nil || c.acc != acc || len(c.e) == cap(c.e) {
		p.flush()
		c = p.batch()
		c.acc = acc
		p.cur = c
	}
	c.e = append(c.e, foldEntry{addr: e.Addr, stream: e.Stream, size: e.Size, time: e.TimeUS, frames: e.Frames, action: e.Action})
}

// batch returns an empty batch: a recycled one, a new one while fewer
// than foldBatches exist, else the next the folder gives back.
func (p *foldPipe) batch() *foldBatch {
	select {
	case c := <-p.free:
		return c
	default:
	}
	if p.made < foldBatches {
		p.made++
		return &foldBatch{e: make([]foldEntry, 0, foldBatchLen)}
	}
	return <-p.free
}

// flush hands the batch being filled to the folder.
func (p *foldPipe) flush() {
	if c := p.cur; c != nil {
		p.cur = nil
		if len(c.e) > 0 {
			p.full <- c
		} else {
			p.free <- c
		}
	}
}

// wait folds what is queued and stops the folder; the accumulators are
// complete (and the decoder's to read) once it returns. It is called on
// every way out of a decode, errors and cancellation included: what is
// left is at most foldBatches batches.
func (p *foldPipe) wait() {
	p.flush()
	close(p.full)
	<-p.done
}
