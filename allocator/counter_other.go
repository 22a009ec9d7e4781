//go:build !amd64 && !arm64

package allocator

// cycleCounter stands in with the monotonic clock where no counter stub
// exists.
func cycleCounter() int64 { return nanotime() }

func counterReliable() bool { return false }
