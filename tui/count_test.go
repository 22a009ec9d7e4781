package tui

import "testing"

// TestCountText: one way to write counts and rates, the step chosen after
// rounding (no "1000 k"), no exponent at either end.
func TestCountText(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 0.001: "0", 2.5: "2.5", 0.25: "0.25", 999: "999", 1234: "1234", 9999: "9999", 123.456: "123",
		10_000: "10 k", 24_612: "24.6 k", 617_000: "617 k", 999_499: "999 k", 999_500: "1 M", 999_999: "1 M",
		1.5e6: "1.5 M", 2_468_000: "2.47 M", 12_345_678: "12.3 M", 999.6e6: "1 G", 2e9: "2 G", 1.5e12: "1500 G",
	} {
		if got := countText(v); got != want {
			t.Errorf("countText(%v) = %q, want %q", v, got, want)
		}
	}
}
