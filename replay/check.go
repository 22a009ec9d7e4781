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

// ParseSize parses "40GiB", "1.5 MiB", "512KiB", "4096B" or "4096" into bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("bad size %q (want e.g. 40GiB, 512MiB, 4096)", s)
	}
	v := f * float64(mult)
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(v), nil
}
