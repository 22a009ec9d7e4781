// Package jobdir recognises the per-rank dumps of a distributed job in one
// directory (docs/ranks.md states the naming rules); monitor/ranks compares
// the ranks' memory once they are loaded.
package jobdir

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/monitor/watch"
	"github.com/npumon/npumon/profiler"
)

// Member is one rank's capture found in a directory.
type Member struct {
	Rank int          `json:"rank"`
	Path string       `json:"path"`
	Kind capture.Kind `json:"kind"` // "snapshot" or "profiler"
	// Rule names how the rank was found: "name" (rank{N} in a file or
	// directory name), "profiler_info" (the profiler's own rank) or
	// "db_name" (ascend_pytorch_profiler_{N}.db).
	Rule string `json:"rule"`
}

// rankRe finds rank{N} as a token of a name: at the start or after one of
// _ . -, optionally rank_{N} or rank-{N}, and ending the name or followed
// by one of _ . -.
var rankRe = regexp.MustCompile(`(?i)(?:^|[_.-])rank[_-]?(\d{1,6})(?:[_.-]|$)`)

// dbRankRe is torch_npu's SQLite export of rank N (export_type db).
var dbRankRe = regexp.MustCompile(`^ascend_pytorch_profiler_(\d{1,6})\.db$`)

// rankInName returns the rank a name carries.
func rankInName(name string) (int, bool) {
	m := rankRe.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// MaxRanks bounds the ranks opened from one job directory: each holds a
// Store of its own (2,000 ranks of a small job took 2.45 GB), so a
// directory of more is refused with a message, not opened.
const MaxRanks = 1024

// Find returns the ranks held in dir, by rank, or nil when dir does not
// hold at least two ranks. The rules, first match per entry of dir:
//
//  1. a profiler directory (*_ascend_pt or any directory torch_npu's
//     profiler wrote) whose profiler_info_{N}.json or rank_id names its
//     rank;
//  2. a directory whose name carries rank{N} (rank0, rank_3, job_rank7_x):
//     its newest snapshot file, else its profiler directory (itself or one
//     inside);
//  3. torch_npu's SQLite export of rank N, ascend_pytorch_profiler_{N}.db;
//  4. a snapshot file whose name carries rank{N} (*_rank{N}_*.pickle,
//     rank{N}.pickle, snapshot_rank_2.json).
//
// When a rank is found more than once, the newest capture (modification
// time, then name) is taken. A directory of several profiler directories
// none of which names its rank is not a ranks directory (nil).
func Find(dir string) ([]Member, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type found struct {
		Member
		mtime int64
	}
	byRank := map[int]found{}
	add := func(m Member) {
		st, err := os.Stat(m.Path)
		if err != nil {
			return
		}
		f := found{m, st.ModTime().UnixNano()}
		if old, ok := byRank[m.Rank]; ok && (old.mtime > f.mtime || old.mtime == f.mtime && old.Path > f.Path) {
			return
		}
		byRank[m.Rank] = f
	}
	for _, e := range ents {
		name := e.Name()
		p := filepath.Join(dir, name)
		if e.IsDir() {
			if profiler.IsProfilerPath(p) {
				if r, ok := profiler.RankOf(p); ok {
					add(Member{Rank: r, Path: p, Kind: capture.Profiler, Rule: "profiler_info"})
					continue
				}
			}
			r, ok := rankInName(name)
			if !ok {
				continue
			}
			if m, ok := inRankDir(p); ok {
				m.Rank = r
				add(m)
			}
			continue
		}
		if m := dbRankRe.FindStringSubmatch(name); m != nil {
			if r, err := strconv.Atoi(m[1]); err == nil {
				add(Member{Rank: r, Path: p, Kind: capture.Profiler, Rule: "db_name"})
			}
			continue
		}
		if r, ok := rankInName(name); ok && watch.IsSnapshotName(name) {
			add(Member{Rank: r, Path: p, Kind: capture.Snapshot, Rule: "name"})
		}
	}
	if len(byRank) < 2 {
		return nil, nil
	}
	if len(byRank) > MaxRanks {
		return nil, fmt.Errorf("%s holds %d ranks, over the limit of %d for one job directory: open one rank's file, or a directory of fewer ranks", dir, len(byRank), MaxRanks)
	}
	out := make([]Member, 0, len(byRank))
	for _, f := range byRank {
		out = append(out, f.Member)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Rank, b.Rank) })
	return out, nil
}

// inRankDir picks a rank directory's capture: its newest snapshot file,
// else the directory itself when the profiler wrote it, else the first
// profiler directory inside.
func inRankDir(dir string) (Member, bool) {
	ents, _ := os.ReadDir(dir)
	var best string
	var bestT int64
	for _, e := range ents {
		if e.IsDir() || !watch.IsSnapshotName(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil || st.Size() == 0 {
			continue
		}
		if t := st.ModTime().UnixNano(); best == "" || t > bestT || t == bestT && p > best {
			best, bestT = p, t
		}
	}
	if best != "" {
		return Member{Path: best, Kind: capture.Snapshot, Rule: "name"}, true
	}
	if profiler.IsProfilerPath(dir) {
		return Member{Path: dir, Kind: capture.Profiler, Rule: "name"}, true
	}
	if ds := profiler.FindProfilerDirs(dir); len(ds) > 0 {
		return Member{Path: ds[len(ds)-1], Kind: capture.Profiler, Rule: "name"}, true
	}
	return Member{}, false
}

// Describe is a one-line account of what Find recognised, for errors and
// headers: "4 ranks (0…3)".
func Describe(ms []Member) string {
	if len(ms) == 0 {
		return "no ranks"
	}
	return fmt.Sprintf("%d ranks (%d…%d)", len(ms), ms[0].Rank, ms[len(ms)-1].Rank)
}
