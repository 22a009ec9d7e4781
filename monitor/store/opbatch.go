package store

import (
	"sync"
	"time"
)

// OpBatcher gathers ops reported one at a time (a workload's OnOp hook)
// into batches for a sink such as Store.AppendOps or Server.PublishOps, so
// the sink is not called per op. A batch goes out when it holds 256 ops,
// ends a step, or is 50 ms old; Flush sends whatever is left.
type OpBatcher struct {
	sink  func([]Op)
	mu    sync.Mutex
	batch []Op
	since time.Time
}

// NewOpBatcher returns a batcher that hands each batch to sink. The sink
// owns the slice it is given.
func NewOpBatcher(sink func([]Op)) *OpBatcher { return &OpBatcher{sink: sink} }

// Add queues op; it may be called from any goroutine.
func (b *OpBatcher) Add(op Op) {
	b.mu.Lock()
	if len(b.batch) == 0 {
		b.since = time.Now()
	}
	b.batch = append(b.batch, op)
	var out []Op
	if len(b.batch) >= 256 || op.IsStep || time.Since(b.since) > 50*time.Millisecond {
		out, b.batch = b.batch, nil
	}
	b.mu.Unlock()
	if out != nil {
		b.sink(out)
	}
}

// Flush sends the ops still queued, if any.
func (b *OpBatcher) Flush() {
	b.mu.Lock()
	out := b.batch
	b.batch = nil
	b.mu.Unlock()
	if len(out) > 0 {
		b.sink(out)
	}
}
