package replay

import "testing"

// TestParseSize: the units npumon's flags accept (check, whatif, demo, sim).
func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"64GiB": 64 << 30, "16G": 16 << 30, "512MiB": 512 << 20, "1.5GB": 3 << 29,
		"1048576": 1 << 20, " 2 TiB ": 2 << 40, "300mb": 300 << 20, "40GiB": 40 << 30, "1.5 MiB": 3 << 19,
		"512KiB": 512 << 10, "4096B": 4096, "4096": 4096, "0": 0, "8k": 8 << 10} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "-1G", "12XB", "1e30", "Inf", "NaN", "1.2.3G", "G12"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}
