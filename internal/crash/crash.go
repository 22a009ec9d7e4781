// Package crash ends the process cleanly on a panic in any goroutine: Go
// cannot recover another goroutine's panic, so every goroutine npumon
// starts defers Recover, which runs the registered restore hooks (the
// terminal UI puts the terminal back), prints the panic, its stack and
// where to report it, and exits 2. A leaf: it imports nothing of npumon's.
package crash

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

var (
	mu    sync.Mutex
	hooks = map[int]func(){}
	next  int
	once  sync.Once
)

// OnCrash registers fn to run once before a crash report is printed (or
// before a fatal signal's default action, see RunHooks); remove
// unregisters it.
func OnCrash(fn func()) (remove func()) {
	mu.Lock()
	defer mu.Unlock()
	id := next
	next++
	hooks[id] = fn
	return func() {
		mu.Lock()
		defer mu.Unlock()
		delete(hooks, id)
	}
}

// RunHooks runs the registered hooks, once per process.
func RunHooks() {
	once.Do(func() {
		mu.Lock()
		fns := make([]func(), 0, len(hooks))
		for _, fn := range hooks {
			fns = append(fns, fn)
		}
		mu.Unlock()
		for _, fn := range fns {
			fn()
		}
	})
}

// Recover, deferred at the top of a goroutine, turns a panic there into a
// clean exit (Exit). It must be deferred itself: defer crash.Recover().
func Recover() {
	if r := recover(); r != nil {
		Exit(r, debug.Stack())
	}
}

// Exit runs the hooks, reports panic value r with its stack on stderr
// and exits 2.
func Exit(r any, stack []byte) {
	RunHooks()
	Report(os.Stderr, r, stack)
	os.Exit(2)
}

// Report writes the crash report: the panic, its stack, and where to
// report it.
func Report(w io.Writer, r any, stack []byte) {
	fmt.Fprintf(w, "npumon: panic: %v\n\n%s\n", r, stack)
	fmt.Fprintln(w, "This is a bug in npumon. Please report it, with the text above and the command you ran,")
	fmt.Fprintln(w, "to the npumon issue tracker (the repository's Issues page).")
}

// GoBounded starts f in a goroutine that defers Recover and is counted in
// wg; f runs while it holds one of sem's slots (at most cap(sem) at once).
func GoBounded(wg *sync.WaitGroup, sem chan struct{}, f func()) {
	wg.Add(1)
	go func() {
		defer Recover()
		defer wg.Done()
		sem <- struct{}{}
		defer func() { <-sem }()
		f()
	}()
}

// GoEvery starts a goroutine that defers Recover and calls f every d
// until stop is closed; the channel it returns is closed when the
// goroutine has returned (f is not running and will not run again).
func GoEvery(stop <-chan struct{}, d time.Duration, f func()) (done <-chan struct{}) {
	finished := make(chan struct{})
	go func() {
		defer Recover()
		defer close(finished)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return finished
}
