package crash

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// GoBounded runs every f, never more than cap(sem) of them at once.
func TestGoBounded(t *testing.T) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	var running, most, ran atomic.Int32
	gate := make(chan struct{})
	for range 6 {
		GoBounded(&wg, sem, func() {
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			<-gate
			running.Add(-1)
			ran.Add(1)
		})
	}
	close(gate)
	wg.Wait()
	if ran.Load() != 6 || most.Load() > 2 {
		t.Fatalf("ran %d (want 6), at most %d at once (want ≤ 2)", ran.Load(), most.Load())
	}
}

// GoEvery calls f until stop is closed; done closes after, and f is not
// called again.
func TestGoEvery(t *testing.T) {
	stop := make(chan struct{})
	var calls atomic.Int32
	ticked := make(chan struct{}, 1)
	done := GoEvery(stop, time.Millisecond, func() {
		calls.Add(1)
		select {
		case ticked <- struct{}{}:
		default:
		}
	})
	<-ticked
	close(stop)
	<-done
	n := calls.Load()
	time.Sleep(5 * time.Millisecond)
	if n == 0 || calls.Load() != n {
		t.Fatalf("calls %d, then %d after done", n, calls.Load())
	}
}
