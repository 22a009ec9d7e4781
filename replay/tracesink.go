package replay

import (
	"sync/atomic"

	"github.com/npumon/npumon/allocator/snapshot"
)

// TraceSink takes a decode's trace entries batch by batch (Options.Trace)
// instead of the snapshot's DeviceTraces, so the whole trace never exists:
// npumon replay streams them into its Store while the file is read.
type TraceSink interface {
	// TraceBatch gets the next entries of trace list number list (lists
	// are numbered from 0 in the order their first entries come; which
	// device each is, Capture.TraceLists says once the decode is done). It
	// is called on a goroutine of its own, beside the decoder, one call at
	// a time, each list's entries in trace order. e is reused once the call
	// returns; t names what e's ids refer to.
	TraceBatch(list int, e []snapshot.TraceEntry, t *TraceTables)
}

// TraceTables are the tables of a decode so far, which a TraceSink's
// entries refer to. They only grow while the decode goes on: a later
// batch's tables hold everything an earlier one's did.
type TraceTables struct {
	// Stacks resolves the entries' Frames (index: StackID); shared with
	// the decoder, which appends to it: read-only, and never appended to.
	Stacks  []snapshot.Stack
	Actions *snapshot.ActionTable // the entries' actions beyond the known ones
	Texts   *snapshot.TextTable   // their compile contexts and user metadata; nil while none
}

// sinkPipe carries trace entries to a TraceSink, keyed by list number.
type sinkPipe = pipe[int, snapshot.TraceEntry]

// traceSink is a decode's side of a TraceSink: the pipe, the tables last
// handed over, the number of lists that had entries.
type traceSink struct {
	p      *sinkPipe
	tables atomic.Pointer[TraceTables]
	lists  int
}

// newTraceSink starts the goroutine feeding sink; b's tables are
// published before each batch is handed over, so the batch's ids resolve.
func newTraceSink(sink TraceSink, b *builder) *traceSink {
	ts := &traceSink{}
	ts.p = newPipe(sinkBatchLen, func(list int, e []snapshot.TraceEntry) { sink.TraceBatch(list, e, ts.tables.Load()) })
	ts.p.handing = func() {
		ts.tables.Store(&TraceTables{Stacks: b.stacks.Stacks(), Actions: b.table, Texts: b.texts})
	}
	return ts
}

// sinkEntry hands trace entry e of list l to the sink (the decoder's
// goroutine): the one place a streamed decode's entries leave it.
func (b *builder) sinkEntry(l *list, e *snapshot.TraceEntry) {
	if l.sinkList == 0 {
		b.sink.lists++
		l.sinkList = b.sink.lists
	}
	l.streamed++
	*b.sink.p.slot(l.sinkList - 1) = *e
}
