package replay

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// CheckLimits are the CI gates of `npumon check`; each applies per device.
type CheckLimits struct {
	MaxPeakActive, MaxPeakReserved       int64
	HasMaxPeakActive, HasMaxPeakReserved bool
	MaxFragmentationPct                  float64 // final inactive bytes / reserved bytes × 100
	HasMaxFragmentation                  bool
	NoOOM                                bool
}

// Fragmentation is the share of a device's reserved memory that is cached
// but unused (inactive), in percent; 0 when nothing is reserved.
func Fragmentation(d *DeviceStats) float64 {
	if d.ReservedBytes == 0 {
		return 0
	}
	return 100 * float64(d.InactiveBytes) / float64(d.ReservedBytes)
}

// Check returns one line per violated limit, nil when all hold.
func Check(st *Stats, lim CheckLimits) []string {
	var out []string
	for i := range st.Devices {
		d := &st.Devices[i]
		if lim.HasMaxPeakActive && d.PeakActiveBytes > lim.MaxPeakActive {
			out = append(out, fmt.Sprintf("device %d: peak active %s exceeds --max-peak %s", d.Device, FormatBytes(d.PeakActiveBytes), FormatBytes(lim.MaxPeakActive)))
		}
		if lim.HasMaxPeakReserved && d.PeakReservedBytes > lim.MaxPeakReserved {
			out = append(out, fmt.Sprintf("device %d: peak reserved %s exceeds --max-reserved %s", d.Device, FormatBytes(d.PeakReservedBytes), FormatBytes(lim.MaxPeakReserved)))
		}
		if f := Fragmentation(d); lim.HasMaxFragmentation && f > lim.MaxFragmentationPct {
			out = append(out, fmt.Sprintf("device %d: fragmentation %.1f%% (inactive %s of reserved %s) exceeds --max-fragmentation %g%%", d.Device, f, FormatBytes(d.InactiveBytes), FormatBytes(d.ReservedBytes), lim.MaxFragmentationPct))
		}
		if lim.NoOOM && d.OOMEvents > 0 {
			out = append(out, fmt.Sprintf("device %d: %d oom event(s) in the trace (--no-oom)", d.Device, d.OOMEvents))
		}
	}
	return out
}

// ParseSize parses a byte count: a plain number or one with a unit, in
// any case — K/M/G/T, KB/MB/GB/TB or KiB/MiB/GiB/TiB, all powers of 1024,
// and B ("40GiB", "1.5 MiB", "16G", "4096B", "4096").
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	f, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("bad size %q (want e.g. 40GiB, 512MiB, 4096)", s)
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}

var sizeUnits = map[string]int64{"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
