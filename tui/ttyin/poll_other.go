//go:build !unix

package ttyin

import "time"

// readable cannot wait without poll(2): the read is passed on as it is.
func readable(uintptr, time.Duration) bool { return false }
