package replay

import (
	"fmt"
	"strconv"

	"github.com/npumon/npumon/allocator/bytesize"
)

// CheckLimits are the CI gates of `npumon check`; each applies per device.
type CheckLimits struct {
	MaxPeakActive, MaxPeakReserved       int64
	HasMaxPeakActive, HasMaxPeakReserved bool
	MaxInactivePct                       float64 // final inactive_fraction × 100
	HasMaxInactive                       bool
	MaxFreeFragmentationPct              float64 // final free_fragmentation × 100
	HasMaxFreeFragmentation              bool
	NoOOM                                bool
}

// InactiveFraction is the share of a device's reserved memory that is
// cached but unused: inactive bytes / reserved bytes (0 when nothing is
// reserved). JSON and flags call it inactive_fraction; it is not the
// free_fragmentation of the segment map (FreeFragmentation).
func InactiveFraction(d *DeviceStats) float64 {
	if d.ReservedBytes == 0 {
		return 0
	}
	return float64(d.InactiveBytes) / float64(d.ReservedBytes)
}

// Check returns one line per violated limit, nil when all hold.
func Check(st *Stats, lim CheckLimits) []string {
	var out []string
	for i := range st.Devices {
		d := &st.Devices[i]
		if lim.HasMaxPeakActive && d.PeakActiveBytes > lim.MaxPeakActive {
			out = append(out, fmt.Sprintf("device %d: peak active %s exceeds --max-peak %s", d.Device, bytesize.Exact(d.PeakActiveBytes), bytesize.Exact(lim.MaxPeakActive)))
		}
		if lim.HasMaxPeakReserved && d.PeakReservedBytes > lim.MaxPeakReserved {
			out = append(out, fmt.Sprintf("device %d: peak reserved %s exceeds --max-reserved %s", d.Device, bytesize.Exact(d.PeakReservedBytes), bytesize.Exact(lim.MaxPeakReserved)))
		}
		if f := 100 * InactiveFraction(d); lim.HasMaxInactive && f > lim.MaxInactivePct {
			got, max := percentApart(f, lim.MaxInactivePct)
			out = append(out, fmt.Sprintf("device %d: inactive fraction %s%% (inactive %s of reserved %s) exceeds --max-inactive-pct %s%%", d.Device, got, bytesize.Exact(d.InactiveBytes), bytesize.Exact(d.ReservedBytes), max))
		}
		if f := 100 * d.FreeFragmentation; lim.HasMaxFreeFragmentation && f > lim.MaxFreeFragmentationPct {
			got, max := percentApart(f, lim.MaxFreeFragmentationPct)
			out = append(out, fmt.Sprintf("device %d: free fragmentation %s%% (largest free block %s of inactive %s) exceeds --max-free-fragmentation %s%%", d.Device, got, bytesize.Exact(d.LargestFreeBlockBytes), bytesize.Exact(d.InactiveBytes), max))
		}
		if lim.NoOOM && d.OOMEvents > 0 {
			out = append(out, fmt.Sprintf("device %d: %d oom event(s) in the trace (--no-oom)", d.Device, d.OOMEvents))
		}
	}
	return out
}

// percentApart formats a measured percentage and its limit with the fewest
// decimals (one at least) that tell them apart, so a violation never reads
// "90.3% exceeds 90.3%".
func percentApart(v, limit float64) (string, string) {
	for prec := 1; ; prec++ {
		a, b := strconv.FormatFloat(v, 'f', prec, 64), strconv.FormatFloat(limit, 'f', prec, 64)
		if a != b || prec >= 12 {
			return a, b
		}
	}
}
