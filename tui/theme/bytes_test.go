package theme

import (
	"fmt"
	"testing"
)

func TestBytes(t *testing.T) {
	for i, c := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1536, "1.50 KiB"}, {12 << 20, "12.0 MiB"},
		{980 << 30, "980 GiB"}, {-2048, "-2.00 KiB"},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := Bytes(c.n); got != c.want {
				t.Errorf("Bytes(%d) = %q, want %q", c.n, got, c.want)
			}
		})
	}
}
