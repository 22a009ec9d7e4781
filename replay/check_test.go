package replay

import (
	"fmt"
	"testing"
)

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
