// Package ttyin reads a terminal so that no read ends inside an escape
// sequence.
//
// Note [Split escape sequences]: Bubble Tea v1 (1.3.10) parses each read on
// its own. When a read fills its 256-byte buffer it waits for more only if
// the unparsed tail scans to the very end as plain runes; a tail such as
// `ESC [ 1 ;` — a burst of shift+→ from key repeat or `tmux send-keys -N 100`
// cut by the buffer — is instead taken as alt+[ followed by the keys `1`,
// `;`, `2`, `C`, which here change the replay speed and the focused pane.
// A read that stops mid-sequence over a slow link does the same. Reader
// makes every read end on a sequence boundary: it reads on while the bytes
// end inside a sequence and more input is there, and when the buffer is full
// it holds the unfinished tail back for the next read. Input that stops
// mid-sequence for longer than Wait is passed on as it is, so a lone Esc key
// still comes through.
package ttyin

import (
	"os"
	"time"
)

// Wait is how long a read that ends inside an escape sequence waits for
// the rest. A terminal sends a sequence in one write; 30 ms covers a slow
// link's split without making a lone Esc feel late.
const Wait = 30 * time.Millisecond

// Reader wraps a terminal. It keeps Fd and Name, so Bubble Tea still puts
// the terminal in raw mode and can cancel a blocked read.
type Reader struct {
	*os.File
	wait    func(fd uintptr, d time.Duration) bool // reports whether fd became readable within d
	pending []byte                                 // an unfinished sequence held back from the last read
}

// New returns a Reader of f.
func New(f *os.File) *Reader { return &Reader{File: f, wait: readable} }

// Read reads like f.Read, but while the bytes end in an unfinished escape
// sequence and more input arrives within Wait, it reads on; when p is full
// it hands on the finished part and keeps the unfinished tail for the next
// call (whose input is already waiting). Input that stops mid-sequence for
// longer than Wait is handed on as it is.
func (r *Reader) Read(p []byte) (int, error) {
	n := copy(p, r.pending)
	r.pending = r.pending[:copy(r.pending, r.pending[n:])]
	if n == 0 {
		m, err := r.File.Read(p)
		if err != nil || m == 0 {
			return m, err
		}
		n = m
	}
	for {
		at := unfinishedAt(p[:n])
		if at < 0 || !r.wait(r.Fd(), Wait) {
			return n, nil
		}
		if n == len(p) {
			if at == 0 {
				return n, nil // one sequence longer than p: Bubble Tea's own problem
			}
			r.pending = append(r.pending, p[at:n]...)
			return at, nil
		}
		m, err := r.File.Read(p[n:])
		n += m
		if err != nil || m == 0 {
			return n, err
		}
	}
}

// Unfinished reports whether b ends inside an escape sequence: a lone ESC,
// a CSI (ESC [) without its final byte, an X10 mouse report short of its
// three bytes, or an SS3 (ESC O) without its key.
func Unfinished(b []byte) bool { return unfinishedAt(b) >= 0 }

// unfinishedAt returns where the unfinished escape sequence at the end of b
// starts, or -1.
func unfinishedAt(b []byte) int {
	i := len(b) - 1
	for i >= 0 && len(b)-i <= 64 && b[i] != 0x1b {
		i--
	}
	if i < 0 || len(b)-i > 64 {
		return -1 // no escape near the end: a sequence is never that long
	}
	s := b[i+1:]
	switch {
	case len(s) == 0:
		return i
	case s[0] == 'O':
		if len(s) == 1 {
			return i
		}
		return -1
	case s[0] != '[':
		return -1 // ESC + key: alt+key, complete
	}
	s = s[1:]
	for j, c := range s {
		if c >= 0x40 && c <= 0x7e { // the final byte
			if c == 'M' && j == 0 && len(s) < 4 {
				return i // X10 mouse: ESC [ M and three bytes
			}
			return -1
		}
		if c < 0x20 || c > 0x3f {
			return -1 // not a CSI after all; Bubble Tea reports it as it is
		}
	}
	return i
}
