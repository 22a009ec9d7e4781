// Package safefile opens input files without the hazards of a plain
// os.Open on a path a user or another process chose: a FIFO, socket or
// device named like a snapshot would block the open or the read forever,
// and a huge file would be read whole. Every reader of npumon input goes
// through Open, and places what it finds wrong in the bytes with an
// OffsetError.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by Open's error for anything but a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading. The open itself never blocks (O_NONBLOCK,
// which then is cleared for a regular file); anything but a regular file
// (a directory, FIFO, socket or device) is refused with an error naming
// path and what it is.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, describe(fi.Mode()))
	}
	// Regular files ignore O_NONBLOCK, but a clean descriptor is clearer.
	if err := syscall.SetNonblock(int(f.Fd()), false); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads a regular file of at most limit bytes (limit <= 0: no
// limit); a larger file is refused before anything is read.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if limit > 0 && fi.Size() > limit {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte limit for this file", path, fi.Size(), limit)
	}
	r := io.Reader(f)
	if limit > 0 {
		r = io.LimitReader(f, limit+1) // a file that grows while read stays bounded
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: grew past the %d-byte limit while being read", path, limit)
	}
	return b, nil
}

// describe names a non-regular file type.
func describe(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// OffsetError is a decoding error at a byte offset of an input, as
// errors.As finds it in every decoder's errors (snapshots, FRAMEWORK
// files, trace_view.json): File is the path ("" when the decoder was fed bytes, not a
// file), Offset where decoding stopped, Field the name of the value that
// was bad ("block.size"; "" when the error is not in one value), and Err
// the cause.
type OffsetError struct {
	File   string
	Offset int64
	Field  string
	Err    error
}

func (e *OffsetError) Error() string {
	s := fmt.Sprintf("offset %d: %v", e.Offset, e.Err)
	if e.File != "" {
		s = e.File + ": " + s
	}
	return s
}

func (e *OffsetError) Unwrap() error { return e.Err }
