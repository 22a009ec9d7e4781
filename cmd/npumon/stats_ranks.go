package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/monitor/ranks"
	"github.com/npumon/npumon/monitor/ranks/jobdir"
	"github.com/npumon/npumon/profiler"
	"github.com/npumon/npumon/replay"
)

// rankStatsJSON is one rank of `stats` on a ranks directory: where it was
// found, its main device's peaks, and the same stats the capture alone gives.
type rankStatsJSON struct {
	jobdir.Member
	Device            int    `json:"device"`
	PeakReservedBytes int64  `json:"peak_reserved_bytes"`
	PeakActiveBytes   *int64 `json:"peak_active_bytes"` // null where a profiler capture has no active column
	OOMEvents         int    `json:"oom_events"`
	Stats             any    `json:"stats"` // replay.Stats or profiler.Stats
}

// ranksStatsJSON is `stats --json` on a directory holding several ranks.
type ranksStatsJSON struct {
	Path      string            `json:"path"`
	Kind      string            `json:"kind"` // "ranks"
	Ranks     []rankStatsJSON   `json:"ranks"`
	Imbalance []ranks.Imbalance `json:"imbalance"`
}

// statsRanks computes every rank's stats and their imbalance.
func statsRanks(dir string, members []jobdir.Member) (*ranksStatsJSON, error) {
	out := &ranksStatsJSON{Path: dir, Kind: "ranks", Ranks: []rankStatsJSON{}, Imbalance: []ranks.Imbalance{}}
	for _, m := range members {
		r := rankStatsJSON{Member: m, Device: -1}
		if m.Kind == capture.Profiler {
			d, err := profiler.ReadDir(m.Path)
			if err != nil {
				return nil, fmt.Errorf("rank %d: %w", m.Rank, err)
			}
			st := profiler.ComputeStats(m.Path, d)
			for _, ds := range st.Devices {
				if r.Device < 0 || ds.PeakReservedBytes > r.PeakReservedBytes {
					r.Device, r.PeakReservedBytes, r.PeakActiveBytes = ds.Device, ds.PeakReservedBytes, ds.PeakActiveBytes
				}
			}
			r.Stats = st
		} else {
			st, err := replay.StatsFile(m.Path, replay.StatsOptions{})
			if err != nil {
				return nil, fmt.Errorf("rank %d: %w", m.Rank, err)
			}
			best := -1
			for i, ds := range st.Devices {
				if best < 0 || ds.TraceEntries > st.Devices[best].TraceEntries ||
					ds.TraceEntries == st.Devices[best].TraceEntries && ds.ReservedBytes > st.Devices[best].ReservedBytes {
					best = i
				}
			}
			if best >= 0 {
				ds := st.Devices[best]
				r.Device, r.PeakReservedBytes, r.OOMEvents = ds.Device, ds.PeakReservedBytes, ds.OOMEvents
				r.PeakActiveBytes = &ds.PeakActiveBytes
			}
			r.Stats = st
		}
		out.Ranks = append(out.Ranks, r)
	}
	ids := make([]int, len(out.Ranks))
	res := make([]int64, len(out.Ranks))
	var act []int64
	for i, r := range out.Ranks {
		ids[i], res[i] = r.Rank, r.PeakReservedBytes
		if r.PeakActiveBytes != nil {
			act = append(act, *r.PeakActiveBytes)
		}
	}
	if im, ok := ranks.ImbalanceOf("peak_reserved_bytes", ids, res); ok {
		out.Imbalance = append(out.Imbalance, im)
	}
	if im, ok := ranks.ImbalanceOf("peak_active_bytes", ids, act); ok && len(act) == len(ids) {
		out.Imbalance = append(out.Imbalance, im)
	}
	return out, nil
}

// writeText prints the ranks as a table, then the imbalance.
func (s *ranksStatsJSON) writeText(w io.Writer) error {
	fmt.Fprintf(w, "%s: %s\n", s.Path, jobdir.Describe(membersOf(s.Ranks)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tdevice\tpeak reserved\tpeak active\tOOMs\t\tcapture")
	for _, r := range s.Ranks {
		act := "-"
		if r.PeakActiveBytes != nil {
			act = bytesize.Torch(*r.PeakActiveBytes)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%d\t\t%s\n", r.Rank, r.Device, bytesize.Torch(r.PeakReservedBytes), act, r.OOMEvents, r.Path)
	}
	tw.Flush()
	for _, im := range s.Imbalance {
		fmt.Fprintf(w, "%s: max/min %.2f× (max rank %d %s, min rank %d %s)\n", im.Figure, im.Ratio,
			im.MaxRank, bytesize.Torch(im.MaxBytes), im.MinRank, bytesize.Torch(im.MinBytes))
	}
	return nil
}

func membersOf(rs []rankStatsJSON) []jobdir.Member {
	out := make([]jobdir.Member, len(rs))
	for i, r := range rs {
		out[i] = r.Member
	}
	return out
}
