package replay

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
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
			out = append(out, fmt.Sprintf("device %d: peak active %s exceeds --max-peak %s", d.Device, FormatBytes(d.PeakActiveBytes), FormatBytes(lim.MaxPeakActive)))
		}
		if lim.HasMaxPeakReserved && d.PeakReservedBytes > lim.MaxPeakReserved {
			out = append(out, fmt.Sprintf("device %d: peak reserved %s exceeds --max-reserved %s", d.Device, FormatBytes(d.PeakReservedBytes), FormatBytes(lim.MaxPeakReserved)))
		}
		if f := 100 * InactiveFraction(d); lim.HasMaxInactive && f > lim.MaxInactivePct {
			got, max := percentApart(f, lim.MaxInactivePct)
			out = append(out, fmt.Sprintf("device %d: inactive fraction %s%% (inactive %s of reserved %s) exceeds --max-inactive-pct %s%%", d.Device, got, FormatBytes(d.InactiveBytes), FormatBytes(d.ReservedBytes), max))
		}
		if f := 100 * d.FreeFragmentation; lim.HasMaxFreeFragmentation && f > lim.MaxFreeFragmentationPct {
			got, max := percentApart(f, lim.MaxFreeFragmentationPct)
			out = append(out, fmt.Sprintf("device %d: free fragmentation %s%% (largest free block %s of inactive %s) exceeds --max-free-fragmentation %s%%", d.Device, got, FormatBytes(d.LargestFreeBlockBytes), FormatBytes(d.InactiveBytes), max))
		}
		if lim.NoOOM && d.OOMEvents > 0 {
			out = append(out, fmt.Sprintf("device %d: %d oom event(s) in the trace (--no-oom)", d.Device, d.OOMEvents))
		}
	}
	return out
}

// ParseSize parses a byte count exactly: a plain number or a decimal with a unit,
// in any case. IEC units are powers of 1024 (KiB, MiB, GiB, TiB, and the bare
// letters K, M, G, T as torch's own settings use them); SI units are powers of
// 1000 (kB/KB, MB, GB, TB: "64GB" is 64,000,000,000 bytes); B is one byte.
// A fraction of a byte is dropped ("12.96GiB" is 13,915,694,612 B).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	whole, frac, _ := strings.Cut(num, ".")
	if !ok || (whole == "" && frac == "") || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("bad size %q (want e.g. 40GiB, 64GB, 512MiB, 4096)", s)
	}
	// value = (whole.frac) × mult, computed as an exact fraction.
	v, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		v = new(big.Int) // "" + "" is refused above; "0" and ".5" parse
	}
	v.Mul(v, big.NewInt(mult))
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q := v.Quo(v, den) // a fraction of a byte is dropped
	if !q.IsInt64() {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return q.Int64(), nil
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

var sizeUnits = map[string]int64{"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}

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
