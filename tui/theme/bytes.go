package theme

import (
	"fmt"
	"strconv"
)

// Bytes formats a byte count with IEC units and three significant digits
// ("512 B", "1.50 KiB", "12.3 MiB", "980 GiB"); every pane shows sizes this way.
func Bytes(n int64) string {
	if n < 0 {
		return "-" + bytesAbs(-n)
	}
	return bytesAbs(n)
}

func bytesAbs(n int64) string {
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

// Count writes n with the singular or plural noun: "1 block", "2 blocks".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
