package whatif

import (
	"fmt"
	"testing"
)

// TestAt: a curve's value after an entry is that of its last point at or
// before it, 0 before the first.
func TestAt(t *testing.T) {
	c := []Point{{Index: -1, Bytes: 10}, {Index: 3, Bytes: 20}, {Index: 7, Bytes: 5}}
	for i, tc := range []struct {
		i    int
		want int64
	}{{-2, 0}, {-1, 10}, {2, 10}, {3, 20}, {6, 20}, {7, 5}, {100, 5}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := At(c, tc.i); got != tc.want {
				t.Errorf("At(%d) = %d, want %d", tc.i, got, tc.want)
			}
		})
	}
}
