package ttyin

import (
	"os"
	"testing"
	"time"
)

func TestUnfinished(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"", false}, {"abc", false}, {"\x1b", true}, {"a\x1b", true}, {"\x1b[", true}, {"\x1b[1;2", true},
		{"\x1b[1;2C", false}, {"\x1b[1;2C\x1b[1;", true}, {"\x1b[1;2C\x1b[1;2C", false}, {"\x1bO", true},
		{"\x1bOA", false}, {"\x1bx", false}, {"\x1b[M", true}, {"\x1b[M ab", false}, {"\x1b[<0;10;5", true},
		{"\x1b[<0;10;5M", false}, {"\x1b[200~", false}, {"\x1b[1;2\x07", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := Unfinished([]byte(tc.in)); got != tc.want {
				t.Errorf("Unfinished(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// A sequence written in two pieces with a pause between comes out of one
// Read whole; a lone Esc comes out after the wait, alone.
func TestReaderJoinsASplitSequence(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	in := New(r)
	// The split must be joined however late the second write comes on a
	// loaded machine: here the wait for the rest is generous.
	in.wait = func(fd uintptr, _ time.Duration) bool { return readable(fd, 10*time.Second) }
	go func() {
		w.Write([]byte("\x1b[1;2C\x1b[1;"))
		time.Sleep(5 * time.Millisecond)
		w.Write([]byte("2C"))
	}()
	buf := make([]byte, 256)
	n, err := in.Read(buf)
	if err != nil || string(buf[:n]) != "\x1b[1;2C\x1b[1;2C" {
		t.Fatalf("read %q, %v; want both sequences whole", buf[:n], err)
	}
	in.wait = readable // a lone Esc: nothing follows within Wait
	w.Write([]byte("\x1b"))
	n, err = in.Read(buf)
	if err != nil || string(buf[:n]) != "\x1b" {
		t.Fatalf("lone Esc: read %q, %v", buf[:n], err)
	}
	// A full buffer ending inside a sequence hands on the finished part and
	// keeps the tail for the next read, which completes it.
	w.Write([]byte("ab\x1b[1;2C"))
	small := make([]byte, 5)
	if n, err := in.Read(small); err != nil || string(small[:n]) != "ab" {
		t.Fatalf("full buffer: read %q, %v", small[:n], err)
	}
	if n, err := in.Read(buf); err != nil || string(buf[:n]) != "\x1b[1;2C" {
		t.Fatalf("after a full buffer: read %q, %v", buf[:n], err)
	}
}
