package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/npumon/npumon/profiler"
)

// isProfilerInput reports whether path is profiler output rather than a
// snapshot file: a directory, or a profiler SQLite export.
func isProfilerInput(path string) bool {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return true
	}
	return profiler.IsDBName(filepath.Base(path))
}

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
