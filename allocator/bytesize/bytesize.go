// Package bytesize writes byte counts as text and reads them back: one
// place for every size npumon shows or accepts. The formats differ by where
// they appear, each under its own name: Format (the TUI's three significant
// digits), Short (chart axes, five characters), Exact (command-line text,
// with the exact count), Torch (torch's format_size, as in its OOM message),
// Summary (torch's memory_summary table) and Parse (flags: IEC and SI units,
// exactly).
package bytesize

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Format writes a byte count with IEC units and three significant digits
// ("512 B", "1.50 KiB", "12.3 MiB", "980 GiB"): every TUI pane shows sizes
// this way.
func Format(n int64) string {
	if n < 0 {
		return "-" + formatAbs(-n)
	}
	return formatAbs(n)
}

func formatAbs(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / unit
	i := 0
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, units[i])
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.2f %s", v, units[i])
}

// Short writes a byte count in at most five characters (chart axes): "512", "1.5K", "980M", "12G".
func Short(v float64) string {
	units := []string{"", "K", "M", "G", "T", "P"}
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v < 10 && i > 0 && v != math.Trunc(v) {
		return fmt.Sprintf("%.1f%s", v, units[i])
	}
	return fmt.Sprintf("%.0f%s", v, units[i])
}

// Exact writes a byte count as one IEC figure and the exact count,
// "1.5 GiB (1610612736 B)" (command-line text and reports).
func Exact(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, u := float64(n), 0
	for (v >= 1024 || v <= -1024) && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s (%d B)", v, units[u], n)
}

// Torch is torch's format_size, the size text of its out-of-memory
// message: "N bytes", then KiB/MiB/GiB with two decimals.
func Torch(n int64) string {
	switch {
	case n <= 1024:
		return fmt.Sprintf("%d bytes", n)
	case n <= 1048576:
		return fmt.Sprintf("%.2f KiB", float64(n)/1024)
	case n <= 1073741824:
		return fmt.Sprintf("%.2f MiB", float64(n)/1048576)
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/1073741824)
}

// Summary is torch's memory_summary _format_size, a cell of its table: a
// right-aligned whole number and a three-column unit ("  1536 B  ",
// " 20480 KiB"), switching unit only above 768 times the smaller one.
func Summary(n int64) string {
	units := []string{"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := n, 0
	for i < len(units)-1 && (v > 768*1024 || v < -768*1024) {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%6d %s", v, units[i])
}

// Parse reads a byte count exactly: a plain number or a decimal with a unit,
// in any case. IEC units are powers of 1024 (KiB, MiB, GiB, TiB, and the bare
// letters K, M, G, T as torch's own settings use them); SI units are powers of
// 1000 (kB/KB, MB, GB, TB: "64GB" is 64,000,000,000 bytes); B is one byte.
// A fraction of a byte is dropped ("12.96GiB" is 13,915,694,612 B).
func Parse(s string) (int64, error) {
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
