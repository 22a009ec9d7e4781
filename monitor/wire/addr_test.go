package wire

import (
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	for _, c := range []struct{ in, network, addr string }{
		{"unix:/tmp/x.sock", "unix", "/tmp/x.sock"},
		{"./x.sock", "unix", "./x.sock"},
		{"tcp:10.0.0.1:7070", "tcp", "10.0.0.1:7070"},
		{"localhost:7070", "tcp", "localhost:7070"},
		{":7070", "tcp", ":7070"},
	} {
		t.Run(c.in, func(t *testing.T) {
			n, a, err := ParseAddr(c.in, -1)
			if err != nil || n != c.network || a != c.addr {
				t.Errorf("ParseAddr(%q) = %s %s %v", c.in, n, a, err)
			}
		})
	}
	if n, a, err := ParseAddr("4242", -1); err != nil || n != "unix" || !strings.Contains(a, "4242") {
		t.Errorf("pid address: %s %s %v", n, a, err)
	}
	if n, a, err := ParseAddr("", 77); err != nil || n != "unix" || a != DefaultSocketPath(77) {
		t.Errorf("empty address: %s %s %v", n, a, err)
	}
	for _, bad := range []string{"unix:", "nowhere", "-3"} {
		if _, _, err := ParseAddr(bad, -1); err == nil {
			t.Errorf("ParseAddr(%q) accepted", bad)
		}
	}
}
