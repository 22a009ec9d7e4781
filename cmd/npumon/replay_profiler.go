package main

import (
	"context"
	"fmt"

	"github.com/npumon/npumon/monitor"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/tui"
)

// profilerLoader reads a torch_npu profiler directory into store
// (monitor.IngestProfiler), reporting progress to the UI.
func profilerLoader(path string, store *monitor.Store) func(context.Context, func(tui.Progress)) error {
	return func(ctx context.Context, report func(tui.Progress)) error {
		done := make(chan error, 1)
		go func() {
			report(tui.Progress{Stage: "reading profiler data"})
			d, err := profiler.ReadDir(path)
			if err != nil {
				done <- err
				return
			}
			err = monitor.IngestProfiler(store, d, func(n int64) {
				report(tui.Progress{Stage: "indexing", EntriesTotal: n})
			})
			if err != nil {
				err = fmt.Errorf("%s: %w", path, err)
			}
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
