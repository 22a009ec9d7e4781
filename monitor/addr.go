package monitor

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseAddr reads a producer address as npumon's flags take it: unix:/path,
// a path with a slash, tcp:host:port, host:port, :port, or a bare pid
// naming that process's default socket (DefaultSocketPath). Empty means
// the default socket of pid.
func ParseAddr(s string, pid int) (network, addr string, err error) {
	switch {
	case s == "":
		return "unix", DefaultSocketPath(pid), nil
	case strings.HasPrefix(s, "unix:"):
		if p := strings.TrimPrefix(s, "unix:"); p != "" {
			return "unix", p, nil
		}
	case strings.HasPrefix(s, "tcp:"):
		return "tcp", strings.TrimPrefix(s, "tcp:"), nil
	case strings.ContainsRune(s, '/'):
		return "unix", s, nil
	case strings.Contains(s, ":"):
		return "tcp", s, nil
	default:
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return "unix", DefaultSocketPath(n), nil
		}
	}
	return "", "", fmt.Errorf("bad address %q (want unix:/path, host:port, :port or a pid)", s)
}
