package wire

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Addr is a producer address as npumon's flags take it, resolved.
type Addr struct {
	Network string // "unix" or "tcp"
	Address string // socket path or host:port
	// PID is the process the address was named by (a bare pid: its
	// default socket), else 0. A client checks that the peer of such a
	// socket is that process, run by this user.
	PID int
}

func (a Addr) String() string { return a.Network + ":" + a.Address }

// ResolveAddr reads a producer address: unix:/path, a path with a slash,
// tcp:host:port, host:port, :port, or a bare pid naming that process's
// default socket (DefaultSocketPath). Empty means the default socket of
// pid.
func ResolveAddr(s string, pid int) (Addr, error) {
	switch {
	case s == "":
		return Addr{"unix", DefaultSocketPath(pid), 0}, nil
	case strings.HasPrefix(s, "unix:"):
		if p := strings.TrimPrefix(s, "unix:"); p != "" {
			return Addr{"unix", p, 0}, nil
		}
	case strings.HasPrefix(s, "tcp:"):
		return Addr{"tcp", strings.TrimPrefix(s, "tcp:"), 0}, nil
	case strings.ContainsRune(s, '/'):
		return Addr{"unix", s, 0}, nil
	case strings.Contains(s, ":"):
		return Addr{"tcp", s, 0}, nil
	default:
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return Addr{"unix", DefaultSocketPath(n), n}, nil
		}
	}
	return Addr{}, fmt.Errorf("bad address %q (want unix:/path, host:port, :port or a pid)", s)
}

// ParseAddr is ResolveAddr returning the network and address only.
func ParseAddr(s string, pid int) (network, addr string, err error) {
	a, err := ResolveAddr(s, pid)
	return a.Network, a.Address, err
}

// CheckSocketDir checks that dir is safe to hold producer sockets: a
// directory (not a symlink) owned by this user with mode 0700, so no other
// local user can have planted a socket there. With create, a missing dir
// is made (its parent must exist). Another user's directory, or one open
// to others, is refused with an error that says how to fix it.
func CheckSocketDir(dir string, create bool) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("socket directory %s is not a directory (%s); remove it or set XDG_RUNTIME_DIR", dir, describeMode(fi.Mode()))
	case ok && int(st.Uid) != os.Getuid():
		return fmt.Errorf("socket directory %s belongs to uid %d, not to this user (uid %d): refusing to use it; remove it or set XDG_RUNTIME_DIR", dir, st.Uid, os.Getuid())
	case fi.Mode().Perm() != 0o700:
		return fmt.Errorf("socket directory %s has mode %04o, want 0700: refusing to use it; chmod 700 it, remove it, or set XDG_RUNTIME_DIR", dir, fi.Mode().Perm())
	}
	return nil
}
