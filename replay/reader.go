package replay

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/npumon/npumon/internal/safefile"
)

// ErrTruncated is wrapped by errors for input that ends before the data it
// announces (errors.Is(err, ErrTruncated)): a file cut short, e.g. still
// being written or copied.
var ErrTruncated = errors.New("unexpected end of file (truncated?)")

// offsetError places err at byte offset off, naming the snapshot key it is
// about ("block.size") as the error's Field. File is set by DecodeFile.
func offsetError(off int64, err error) *safefile.OffsetError {
	e := &safefile.OffsetError{Offset: off, Err: err}
	var ke *keyError
	if errors.As(err, &ke) {
		e.Field = ke.field()
	}
	return e
}

// ctxCheckEvery is how many input bytes a decode reads between looks at
// its context: a cancelled load stops within about this much work.
const ctxCheckEvery = 256 << 10

// byteReader is a buffered reader that tracks the absolute offset and hands
// out slices of its buffer, so the decoder copies only what it keeps.
type byteReader struct {
	r     io.Reader
	buf   []byte
	pos   int   // next unread byte in buf
	end   int   // bytes valid in buf
	base  int64 // file offset of buf[0]
	eof   bool
	err   error
	total int64 // file size when known, else -1

	progress     func(done, total int64)
	nextProgress int64

	ctx       context.Context // nil: never cancelled
	nextCheck int64
}

const (
	readChunk     = 1 << 20
	progressEvery = 4 << 20
)

func newByteReader(r io.Reader, size int64, progress func(done, total int64)) *byteReader {
	n := readChunk
	if size >= 0 && size < readChunk {
		n = int(size) + 16
	}
	return &byteReader{r: r, buf: make([]byte, n), total: size, progress: progress}
}

// offset is the file offset of the next unread byte.
func (b *byteReader) offset() int64 { return b.base + int64(b.pos) }

// fill makes at least n bytes available unless the input ends first.
func (b *byteReader) fill(n int) bool {
	if b.end-b.pos >= n {
		return true
	}
	if b.pos > 0 {
		copy(b.buf, b.buf[b.pos:b.end])
		b.base += int64(b.pos)
		b.end -= b.pos
		b.pos = 0
	}
	if n > len(b.buf) {
		nb := make([]byte, max(n, 2*len(b.buf)))
		copy(nb, b.buf[:b.end])
		b.buf = nb
	}
	if b.ctx != nil && b.base+int64(b.end) >= b.nextCheck {
		if err := b.ctx.Err(); err != nil {
			b.eof, b.err = true, err
		}
		b.nextCheck = b.base + int64(b.end) + ctxCheckEvery
	}
	for b.end < n && !b.eof {
		m, err := b.r.Read(b.buf[b.end:])
		b.end += m
		if err == io.EOF {
			b.eof = true
		} else if err != nil {
			b.eof = true
			b.err = err
		}
	}
	if b.progress != nil && b.base+int64(b.end) >= b.nextProgress {
		b.progress(b.base+int64(b.end), b.total)
		b.nextProgress = b.base + int64(b.end) + progressEvery
	}
	return b.end-b.pos >= n
}

func (b *byteReader) fail() error {
	if b.err != nil {
		return b.err
	}
	return ErrTruncated
}

// byte reads one byte.
func (b *byteReader) byte() (byte, error) {
	if b.pos >= b.end && !b.fill(1) {
		return 0, b.fail()
	}
	c := b.buf[b.pos]
	b.pos++
	return c, nil
}

// next returns the next n bytes; the slice is valid until the next call.
func (b *byteReader) next(n int) ([]byte, error) {
	if b.end-b.pos < n && !b.fill(n) {
		return nil, b.fail()
	}
	s := b.buf[b.pos : b.pos+n]
	b.pos += n
	return s, nil
}

// checkLen rejects a length the rest of the input cannot hold, before any
// allocation of that size.
func (b *byteReader) checkLen(n uint64, what string) (int, error) {
	if n > maxStringLen {
		return 0, fmt.Errorf("%s of %d bytes exceeds the %d-byte limit", what, n, maxStringLen)
	}
	if b.total >= 0 && int64(n) > b.total-b.offset() {
		return 0, fmt.Errorf("%s of %d bytes runs past the end of the file (%w)", what, n, ErrTruncated)
	}
	return int(n), nil
}

// maxStringLen caps any single string or byte string.
const maxStringLen = 64 << 20

// seekTo moves the next unread byte to file offset off, within the buffer
// or by seeking the input (the parallel decode skips a run its helper
// decoded); false, changing nothing, if it cannot.
func (b *byteReader) seekTo(off int64) bool {
	if off >= b.base+int64(b.pos) && off <= b.base+int64(b.end) {
		b.pos = int(off - b.base)
		return true
	}
	s, ok := b.r.(io.Seeker)
	if !ok || off < b.base {
		return false
	}
	if _, err := s.Seek(off, io.SeekStart); err != nil {
		return false
	}
	b.base, b.pos, b.end, b.eof, b.err = off, 0, 0, false, nil
	return true
}
