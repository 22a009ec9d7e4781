//go:build !linux

package wire

import (
	"errors"
	"net"
)

// peerCred is only implemented on Linux.
func peerCred(net.Conn) (pid, uid int, err error) {
	return 0, 0, errors.New("peer credentials are not available on this system")
}
