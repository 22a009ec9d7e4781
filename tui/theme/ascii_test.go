package theme

import "testing"

func TestToASCII(t *testing.T) {
	for in, want := range map[string]string{
		"↑/↓ select · enter opens · esc closes": "up/down select | enter opens | esc closes",
		"npumon · ranks · job │ dev 0":          "npumon | ranks | job | dev 0",
		"peak 2.00× · ∞ · 12 µs · Δ 3…":         "peak 2.00x | inf | 12 us | d 3...",
		"█▒░ ▶ ✗ ┆ ─ ← → •":                     "#+. > X : - <- -> |",
		"a ☃ b":                                 "a ? b",
		"free frag — · times ≈ ±0 · ≤ 5 ≥ 2–3":  "free frag - | times ~ ?0 | <= 5 >= 2-3",
	} {
		if got := ToASCII(in); got != want {
			t.Errorf("ToASCII(%q) = %q, want %q", in, got, want)
		}
	}
}
