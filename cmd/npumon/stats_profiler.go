package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/npumon/npumon/profiler"
)

// statsProfiler prints `npumon stats` for profiler output.
func statsProfiler(path string, jsonOut bool, w, errOut io.Writer) error {
	d, err := profiler.ReadDir(path)
	if err != nil {
		return err
	}
	st := profiler.ComputeStats(path, d)
	if jsonOut {
		// the text lists every warning; JSON readers get what makes the
		// figures suspect (profiler.Sanity) on stderr, as snapshots' do
		for _, warn := range d.Warnings {
			if strings.Contains(warn, ": implausible: ") {
				fmt.Fprintf(errOut, "npumon: warning: %s\n", warn)
			}
		}
		return writeJSON(w, st)
	}
	return profiler.WriteStatsText(w, &st, d)
}
