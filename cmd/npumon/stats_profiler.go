package main

import (
	"io"

	"github.com/npumon/npumon/profiler"
)

// statsProfiler prints `npumon stats` for profiler output.
func statsProfiler(path string, jsonOut bool, w io.Writer) error {
	d, err := profiler.ReadDir(path)
	if err != nil {
		return err
	}
	st := profiler.ComputeStats(path, d)
	if jsonOut {
		return writeJSON(w, st)
	}
	return profiler.WriteStatsText(w, &st, d)
}
