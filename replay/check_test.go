package replay

import (
	"fmt"
	"testing"
)

// TestParseSize: the units npumon's flags accept (check, whatif, demo, sim),
// IEC as powers of 1024 and SI as powers of 1000, exactly.
func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"64GiB", 64 << 30}, {"16G", 16 << 30}, {"512MiB", 512 << 20}, {"1.5GiB", 3 << 29},
		{"1.5GB", 1_500_000_000}, {"64GB", 64_000_000_000}, {"300mb", 300_000_000}, {"2kB", 2000},
		{"1048576", 1 << 20}, {" 2 TiB ", 2 << 40}, {"1TB", 1_000_000_000_000}, {"40GiB", 40 << 30},
		{"1.5 MiB", 3 << 19}, {"512KiB", 512 << 10}, {"4096B", 4096}, {"4096", 4096}, {"0", 0},
		{"8k", 8 << 10}, {".5KiB", 512}, {"13.923997700GB", 13923997700},
		{"8388607TiB", 8388607 << 40}, {"12.96GiB", 13915694039}, {"0.3B", 0},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got, err := ParseSize(tc.in); err != nil || got != tc.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
	for _, in := range []string{"", "GiB", "-1G", "12XB", "1e30", "Inf", "NaN", "1.2.3G", "G12", ".", "8388608TiB", "99999999999999999999"} {
		t.Run("refuses "+in, func(t *testing.T) {
			if v, err := ParseSize(in); err == nil {
				t.Errorf("ParseSize(%q) accepted as %d", in, v)
			}
		})
	}
}

// TestPercentApart: a violation shows as many decimals as it takes to tell the
// measured figure from its limit, and one when they are far apart.
func TestPercentApart(t *testing.T) {
	for i, tc := range []struct {
		v, lim   float64
		got, max string
	}{
		{90.2846, 90.28, "90.285", "90.280"},
		{90.2846, 50, "90.3", "50.0"},
		{50.04, 50, "50.04", "50.00"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if g, m := percentApart(tc.v, tc.lim); g != tc.got || m != tc.max {
				t.Errorf("percentApart(%g, %g) = %s, %s; want %s, %s", tc.v, tc.lim, g, m, tc.got, tc.max)
			}
		})
	}
}
