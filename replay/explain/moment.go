package explain

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Moment is a position in a device trace: right after entry Index (-1:
// before the first entry).
type Moment struct {
	Spec   string `json:"spec"` // what was asked for: peak, end, oom:N, #I or a time
	Index  int    `json:"index"`
	TimeUS *int64 `json:"time_us"` // the entry's epoch µs; null without times or at -1
}

// At resolves a moment spec on a timeline:
//
//	peak     the first entry after which active bytes are highest (-1: the start)
//	end      the last entry
//	oom      the first oom entry; oom:N the N-th (1-based)
//	#I       entry I (0-based; #-1 is the start)
//	TIME     epoch µs: the last entry at or before TIME
//
// Errors name the spec as holders' --at; FlagAt names another flag.
func At(tl *replay.Timeline, spec string) (Moment, error) { return FlagAt(tl, spec, "--at") }

// FlagAt is At with errors naming flag (diff's --from and --to).
func FlagAt(tl *replay.Timeline, spec, flag string) (Moment, error) {
	n := len(tl.Entries)
	m := Moment{Spec: spec}
	switch {
	case spec == "" || spec == "end":
		m.Spec, m.Index = "end", n-1
	case spec == "peak":
		m.Index = PeakIndex(tl)
	case spec == "oom" || strings.HasPrefix(spec, "oom:"):
		k := 1
		if spec != "oom" {
			v, err := strconv.Atoi(spec[4:])
			if err != nil || v < 1 {
				return m, fmt.Errorf("%s %q: want oom:N with N ≥ 1", flag, spec)
			}
			k = v
		}
		ooms := OOMIndices(tl)
		if k > len(ooms) {
			return m, fmt.Errorf("%s %q: device %d has %d oom entries", flag, spec, tl.Device, len(ooms))
		}
		m.Index = ooms[k-1]
	case strings.HasPrefix(spec, "#"):
		v, err := strconv.Atoi(spec[1:])
		if err != nil || v < -1 || v >= n {
			return m, fmt.Errorf("%s %q: want #I with I in -1…%d", flag, spec, n-1)
		}
		m.Index = v
	default:
		t, err := strconv.ParseInt(spec, 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s %q: want peak, end, oom[:N], #INDEX or an epoch time in µs", flag, spec)
		}
		if !hasTimes(tl) {
			return m, fmt.Errorf("%s %q: device %d's trace has no timestamps; use #INDEX", flag, spec, tl.Device)
		}
		// entries are in trace order; times are monotonic in real files
		m.Index = sort.Search(n, func(i int) bool { return tl.Entries[i].TimeUS > t }) - 1
	}
	m.TimeUS = timeOf(tl, m.Index)
	return m, nil
}

func hasTimes(tl *replay.Timeline) bool {
	for i := range tl.Entries {
		if tl.Entries[i].TimeUS != 0 {
			return true
		}
	}
	return false
}

func timeOf(tl *replay.Timeline, i int) *int64 {
	if i < 0 || i >= len(tl.Entries) || tl.Entries[i].TimeUS == 0 {
		return nil
	}
	t := tl.Entries[i].TimeUS
	return &t
}

// PeakIndex is the first entry after which the active series is highest
// (-1 when the start is), as `npumon stats` reports it.
func PeakIndex(tl *replay.Timeline) int {
	v, peak, at := tl.ActiveAtStart, tl.ActiveAtStart, -1
	for i := range tl.Entries {
		v += replay.ActiveDelta(&tl.Entries[i])
		if v > peak {
			peak, at = v, i
		}
	}
	return at
}

// OOMIndices lists the trace indices of the oom entries.
func OOMIndices(tl *replay.Timeline) []int {
	var out []int
	for i := range tl.Entries {
		if tl.Entries[i].Action == snapshot.ActionOOM {
			out = append(out, i)
		}
	}
	return out
}
