package bytesize

import (
	"fmt"
	"testing"
)

func TestFormat(t *testing.T) {
	for i, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1536, "1.50 KiB"}, {12 << 20, "12.0 MiB"},
		{980 << 30, "980 GiB"}, {-2048, "-2.00 KiB"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := Format(c.n); got != c.want {
				t.Errorf("Format(%d) = %q, want %q", c.n, got, c.want)
			}
		})
	}
}

func TestShort(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 512: "512", 1536: "1.5K", 980 << 20: "980M", 12 << 30: "12G", 1000: "1.0K",
	} {
		if got := Short(v); got != want {
			t.Errorf("Short(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestParse: the units npumon's flags accept (check, whatif, demo, sim),
// IEC as powers of 1024 and SI as powers of 1000, exactly.
func TestParse(t *testing.T) {
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
			if got, err := Parse(tc.in); err != nil || got != tc.want {
				t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
	for _, in := range []string{"", "GiB", "-1G", "12XB", "1e30", "Inf", "NaN", "1.2.3G", "G12", ".", "8388608TiB", "99999999999999999999"} {
		t.Run("refuses "+in, func(t *testing.T) {
			if v, err := Parse(in); err == nil {
				t.Errorf("Parse(%q) accepted as %d", in, v)
			}
		})
	}
}

func TestExactAndTorch(t *testing.T) {
	for n, want := range map[int64]string{512: "512 B", 1536: "1.5 KiB (1536 B)", 3 << 29: "1.5 GiB (1610612736 B)", -2048: "-2.0 KiB (-2048 B)"} {
		if got := Exact(n); got != want {
			t.Errorf("Exact(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{1024: "1024 bytes", 1536: "1.50 KiB", 20 << 20: "20.00 MiB", 3 << 29: "1.50 GiB"} {
		if got := Torch(n); got != want {
			t.Errorf("Torch(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{1536: "  1536 B  ", 768 << 10: "786432 B  ", 768<<10 + 1: "   768 KiB", 20 << 20: " 20480 KiB", 3 << 29: "  1536 MiB", -(1 << 30): " -1024 MiB"} {
		if got := Summary(n); got != want {
			t.Errorf("Summary(%d) = %q, want %q", n, got, want)
		}
	}
}
