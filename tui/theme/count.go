package theme

import (
	"strconv"
)

// Count writes n with the singular or plural noun: "1 block", "2 blocks".
func Count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
