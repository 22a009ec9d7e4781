package profiler

import (
	"path/filepath"
	"strconv"
	"strings"
)

// RankOf returns the distributed rank a profiler directory was written by:
// the N of its profiler_info_N.json, else the rank_id inside its
// profiler_info*.json. ok is false for a single-card run (neither).
func RankOf(dir string) (rank int, ok bool) {
	p := findProfilerInfo(dir)
	if p == "" {
		return 0, false
	}
	name := strings.TrimSuffix(filepath.Base(p), ".json")
	if i := strings.LastIndexByte(name, '_'); i >= 0 && name[:i] == "profiler_info" {
		if n, err := strconv.Atoi(name[i+1:]); err == nil && n >= 0 {
			return n, true
		}
	}
	pi, err := ReadProfilerInfo(p)
	if err != nil || pi.RankID == nil || *pi.RankID < 0 {
		return 0, false
	}
	return *pi.RankID, true
}
