// Package ranks compares the memory of a distributed job's ranks: per rank
// the figures at the newest entry and at the peaks, and the imbalance
// across ranks. monitor/ranks/jobdir finds the ranks in a directory.
package ranks

import "github.com/npumon/npumon/monitor/store"

// Figures are one rank's memory figures, from its Store: at the newest
// entry, and the peaks over the whole trace (the Store's active, requested
// and reserved series, docs/timeline.md); allocated_bytes is rounded block
// sizes as everywhere (docs/json.md).
type Figures struct {
	Rank               int            `json:"rank"`
	Device             int            `json:"device"`
	Entries            int64          `json:"entries"`
	TimeBase           store.TimeBase `json:"-"`
	ActiveBytes        int64          `json:"active_bytes"`
	AllocatedBytes     int64          `json:"allocated_bytes"`
	ReservedBytes      int64          `json:"reserved_bytes"`
	PeakActiveBytes    int64          `json:"peak_active_bytes"`
	PeakRequestedBytes int64          `json:"peak_requested_bytes"`
	PeakReservedBytes  int64          `json:"peak_reserved_bytes"`
	PeakActiveTime     int64          `json:"peak_active_time"` // cursor of the active peak (epoch µs, or entry index)
	OOMs               int            `json:"ooms"`
}

// MainDevice is the device a rank's Store is about: the one with the most
// entries (ties: the lowest id); -1 when the Store has none.
func MainDevice(st *store.Store) int {
	best, n := -1, int64(-1)
	for _, d := range st.Devices() {
		if l := st.Len(d); l > n {
			best, n = d, l
		}
	}
	return best
}

// FromStore reads a rank's figures at the newest entry of its main device.
// ok is false while the Store holds no device.
func FromStore(rank int, st *store.Store) (f Figures, ok bool) {
	dev := MainDevice(st)
	if dev < 0 {
		return Figures{Rank: rank, Device: -1}, false
	}
	s := st.SummaryAtSeq(dev, st.Len(dev))
	return Figures{Rank: rank, Device: dev, Entries: s.Entries, TimeBase: s.TimeBase,
		ActiveBytes: s.ActiveBytes, AllocatedBytes: s.MapAllocatedBytes, ReservedBytes: s.ReservedBytes,
		PeakActiveBytes: s.PeakActiveBytes, PeakRequestedBytes: s.PeakAllocatedBytes,
		PeakReservedBytes: s.PeakReservedBytes, PeakActiveTime: s.PeakActiveTime, OOMs: s.OOMs}, true
}

// Imbalance compares one figure across ranks: the largest and smallest
// value and their ranks (the lowest rank on ties), and max/min.
type Imbalance struct {
	Figure   string  `json:"figure"`
	MaxRank  int     `json:"max_rank"`
	MaxBytes int64   `json:"max_bytes"`
	MinRank  int     `json:"min_rank"`
	MinBytes int64   `json:"min_bytes"`
	Ratio    float64 `json:"max_over_min"` // 0 when the smallest value is 0
}

// ImbalanceOf compares values[i] of rank ranks[i]; ok is false for fewer
// than one value.
func ImbalanceOf(figure string, ranks []int, values []int64) (im Imbalance, ok bool) {
	if len(values) == 0 || len(values) != len(ranks) {
		return Imbalance{Figure: figure}, false
	}
	im = Imbalance{Figure: figure, MaxRank: ranks[0], MaxBytes: values[0], MinRank: ranks[0], MinBytes: values[0]}
	for i := 1; i < len(values); i++ {
		v, r := values[i], ranks[i]
		if v > im.MaxBytes || v == im.MaxBytes && r < im.MaxRank {
			im.MaxBytes, im.MaxRank = v, r
		}
		if v < im.MinBytes || v == im.MinBytes && r < im.MinRank {
			im.MinBytes, im.MinRank = v, r
		}
	}
	if im.MinBytes > 0 {
		im.Ratio = float64(im.MaxBytes) / float64(im.MinBytes)
	}
	return im, true
}

// Compare gives the imbalance of the peaks (reserved, allocated, active)
// across the ranks' figures.
func Compare(figs []Figures) []Imbalance {
	ranks := make([]int, len(figs))
	var res, alloc, act []int64
	for i, f := range figs {
		ranks[i] = f.Rank
		res = append(res, f.PeakReservedBytes)
		alloc = append(alloc, f.PeakRequestedBytes)
		act = append(act, f.PeakActiveBytes)
	}
	var out []Imbalance
	for _, c := range []struct {
		name string
		v    []int64
	}{{"peak_reserved_bytes", res}, {"peak_requested_bytes", alloc}, {"peak_active_bytes", act}} {
		if im, ok := ImbalanceOf(c.name, ranks, c.v); ok {
			out = append(out, im)
		}
	}
	return out
}
