package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/tui"
)

// preloadGrace is how long a command waits for its input to load before it
// opens the terminal UI: a small or broken file fails (or is checked) on the
// command line, with its one-line error and exit 2, and only a load still
// running after it is shown behind the UI with its progress. Short, so the
// first screen of any file comes up within a second (issue #29): a big
// file's first batches are on screen while the rest streams in.
const preloadGrace = 250 * time.Millisecond

// smallInput is the largest file read whole before the UI opens (about
// 185,000 entries, a few hundred ms to decode), so that its errors and flag
// checks never depend on how busy the machine is.
const smallInput = 16 << 20

// preload starts load at once and waits up to grace for it. It returns the
// load's error when it ended within grace, a device flag error when the
// loaded store lacks the asked device (device < 0: none asked, the first is shown), and otherwise a tui.Options.Load that
// joins the running load (progress included) and checks the device when it
// ends. A load still running after grace is first vetted by the cheap check
// quick (nil: none), whose error stops it; quick runs beside the load from
// the start, so its time (a skim of a big file) overlaps the grace, and one
// still running after the grace goes on behind the UI, its error ending
// the load there.
// Cancelling ctx stops the load.
func preload(ctx context.Context, load func(context.Context, func(tui.Progress)) error, st *store.Store, device int, grace time.Duration, quick func() error) (func(context.Context, func(tui.Progress)) error, error) {
	var (
		mu     sync.Mutex
		last   tui.Progress
		report func(tui.Progress)
	)
	relay := func(p tui.Progress) {
		mu.Lock()
		last = p
		r := report
		mu.Unlock()
		if r != nil {
			r(p)
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { defer crash.Recover(); done <- load(lctx, relay) }()
	quickErr := make(chan error, 1)
	if quick != nil {
		go func() { defer crash.Recover(); quickErr <- quick() }()
	}
	check := func(err error) error {
		if err != nil {
			return err
		}
		if devs := st.Devices(); device >= 0 && len(devs) > 0 && !slices.Contains(devs, device) {
			return usageError{fmt.Errorf("--device %d: the input has device(s) %v", device, devs)}
		}
		return nil
	}
	select {
	case err := <-done:
		cancel()
		if err := check(err); err != nil {
			return nil, err
		}
		return func(context.Context, func(tui.Progress)) error { return nil }, nil
	case <-time.After(grace):
	}
	if quick != nil {
		select {
		case err := <-quickErr:
			if err != nil {
				cancel()
				<-done
				return nil, err
			}
			quickErr = nil // vetted
		default:
			// Still skimming (a big file on a busy host): the UI opens
			// now, and the skim's error, if any, ends the load behind it.
		}
	}
	return func(uctx context.Context, r func(tui.Progress)) error {
		mu.Lock()
		report = r
		p := last
		mu.Unlock()
		if r != nil {
			r(p)
		}
		for {
			select {
			case err := <-done:
				cancel()
				return check(err)
			case err := <-quickErr: // nil once vetted: never ready
				quickErr = nil
				if err != nil {
					cancel()
					<-done
					return err
				}
			case <-uctx.Done():
				cancel()
				<-done
				return uctx.Err()
			}
		}
	}, nil
}
