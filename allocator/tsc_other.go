//go:build !amd64

package allocator

// rdtsc is unavailable off amd64; the monotonic clock stands in.
func rdtsc() int64 { return nanotime() }

func tscReliable() bool { return false }
