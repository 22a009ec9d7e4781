package main

import (
	"encoding/json"
	"io"

	"github.com/npumon/npumon/profiler"
)

// Profiler directories for `npumon stats DIR`: the stats command calls
// statsProfilerDir for any directory argument.
func init() { statsProfilerDir = statsProfiler }

func statsProfiler(path string, jsonOut bool, w io.Writer) error {
	d, err := profiler.ReadDir(path)
	if err != nil {
		return err
	}
	st := profiler.ComputeStats(path, d)
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	return profiler.WriteStatsText(w, &st, d)
}
