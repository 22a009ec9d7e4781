package chart

import "testing"

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 7: 8, 13: 15, 101: 120} {
		if got := NiceCeil(v); got < v || got != want {
			t.Errorf("NiceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestAxisRune(t *testing.T) {
	if AxisRune('┼', true) != '+' || AxisRune('│', true) != '|' || AxisRune('─', false) != '─' || AxisRune('x', true) != 'x' {
		t.Error("axis runes")
	}
}
