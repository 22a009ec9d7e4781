package tui

import (
	"math"
	"strconv"
)

// countText writes a count or a rate the one way the screen writes them:
// exact below 10,000 (fractions to 3 figures: 2.5; under 0.01, 0), above that 3 figures
// with a k/M/G step (24.6 k, 617 k, 2.47 M). The step is chosen after
// rounding, so 999,999 is 1 M, not 1000 k.
func countText(v float64) string {
	switch {
	case v >= 999.5e6:
		return figures3(v/1e9) + " G"
	case v >= 999.5e3:
		return figures3(v/1e6) + " M"
	case v >= 1e4:
		return figures3(v/1e3) + " k"
	case v >= 100 || v == math.Trunc(v) || v < 0.01:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return figures3(v)
}

// figures3 is x to 3 significant figures, without exponent or trailing zeros.
func figures3(x float64) string {
	if x >= 999.5 {
		return strconv.FormatFloat(math.Round(x), 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}
