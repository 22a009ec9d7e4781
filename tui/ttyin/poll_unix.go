//go:build unix

package ttyin

import (
	"time"

	"golang.org/x/sys/unix"
)

// readable waits up to d for fd to have input.
func readable(fd uintptr, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	}
}
