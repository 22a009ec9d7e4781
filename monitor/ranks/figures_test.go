package ranks

import "testing"

// TestImbalanceTiesAndZero: of equal values the lowest rank is named, and
// no values give no imbalance.
func TestImbalanceTiesAndZero(t *testing.T) {
	im, ok := ImbalanceOf("x", []int{3, 1, 2}, []int64{5, 5, 0})
	if !ok || im.MaxRank != 1 || im.MinRank != 2 || im.Ratio != 0 {
		t.Fatalf("%+v", im)
	}
	if _, ok := ImbalanceOf("x", nil, nil); ok {
		t.Fatal("no values: ok")
	}
}
