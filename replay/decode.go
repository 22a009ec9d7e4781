package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/safefile"
)

// Capture is one decoded snapshot file.
type Capture struct {
	Path   string // the file it came from ("" for Decode without a name)
	Format string // FormatPickle or FormatJSON
	Schema string // SchemaTorch113, SchemaTorch20, SchemaTorch21 or SchemaTorchNPU
	// SchemaEvidence says what in the file decided Schema (torch_npu or
	// PyTorch's CUDA allocator, and which layout).
	SchemaEvidence string
	Snapshot       *snapshot.Snapshot
	// Implausible is what Sanity found wrong with the snapshot's values
	// (nil: nothing); decoding still succeeds, and the caller warns.
	Implausible *Implausible
	// TraceLists, for a decode with Options.Trace, gives per device (as
	// Snapshot.DeviceTraces, whose traces are then all empty) the number
	// of the TraceSink list that was its trace, -1 where it had none.
	TraceLists []int
}

// Formats reported by Capture.Format.
const (
	FormatPickle = "pickle"
	FormatJSON   = "json"
)

// Options tune decoding.
type Options struct {
	// Progress, when set, is called from the decoding goroutine every few
	// MiB with the bytes read so far and the total size (-1 when unknown).
	Progress func(done, total int64)
	// MaxFileSize refuses a file larger than this many bytes before
	// anything is read (DecodeFile; 0: no limit).
	MaxFileSize int64
	// MaxMemory caps the decoder's memory budget (which otherwise grows
	// with the input's size) at this many bytes; past it decoding fails
	// with an error instead of allocating more (0: no cap).
	MaxMemory int64
	// Trace, when set, takes the trace entries as they are decoded, in
	// batches beside the decoder (TraceSink); the Capture's DeviceTraces
	// are then empty and its TraceLists say which list was which device.
	// Every batch has been taken when the decode returns, an error
	// included (the sink has then seen a prefix of the trace).
	Trace TraceSink
}

// ErrNotSnapshot is wrapped by errors for input that is not a memory
// snapshot at all (as opposed to a damaged one).
var ErrNotSnapshot = errors.New("not a memory snapshot")

// DecodeFile reads a snapshot file. Errors are one line naming the path and
// the byte offset or key where decoding stopped; errors.As finds an
// *safefile.OffsetError in those, errors.Is finds ErrTruncated or ErrNotSnapshot.
func DecodeFile(path string, opts Options) (*Capture, error) {
	return DecodeFileContext(context.Background(), path, opts)
}

// DecodeFileContext is DecodeFile stopping when ctx ends: decoding looks
// at ctx every few hundred KiB of input and then returns an error that
// wraps ctx.Err().
func DecodeFileContext(ctx context.Context, path string, opts Options) (*Capture, error) {
	c, _, err := decodeFile(ctx, path, opts, noStream)
	return c, err
}

// decodeFileStreaming decodes without keeping trace entries: they are
// folded into one accumulator per device (mode: how, streamAuto unless a
// test compares the ways).
func decodeFileStreaming(path string, mode streamMode) (*Capture, []*traceAcc, error) {
	return decodeFile(context.Background(), path, Options{}, mode)
}

func decodeFile(ctx context.Context, path string, opts Options, stream streamMode) (*Capture, []*traceAcc, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	size := int64(-1)
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	if opts.MaxFileSize > 0 && size > opts.MaxFileSize {
		return nil, nil, fmt.Errorf("%s: %s, over the %s limit for a snapshot here", path, bytesize.Torch(size), bytesize.Torch(opts.MaxFileSize))
	}
	c, accs, err := decode(ctx, f, size, opts, stream)
	if oe, ok := err.(*safefile.OffsetError); ok {
		oe.File = path
		return nil, nil, oe
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	c.Implausible = Sanity(c.Snapshot)
	return c, accs, nil
}

// Decode reads a snapshot from r; size is its length in bytes or -1. The
// format (pickle protocol 2–5 or JSON) is detected from the content.
func Decode(r io.Reader, size int64, opts Options) (*Capture, error) {
	return DecodeContext(context.Background(), r, size, opts)
}

// DecodeContext is Decode stopping when ctx ends (DecodeFileContext).
func DecodeContext(ctx context.Context, r io.Reader, size int64, opts Options) (*Capture, error) {
	c, _, err := decode(ctx, r, size, opts, noStream)
	return c, err
}

func decode(ctx context.Context, r io.Reader, size int64, opts Options, stream streamMode) (*Capture, []*traceAcc, error) {
	var par *parInput
	if stream != noStream && opts.Trace == nil && opts.Progress == nil && ctx.Done() == nil {
		par = parInputOf(r, size, stream)
	}
	c, accs, err := decodeFormat(ctx, r, size, opts, stream, par)
	if err != nil && par != nil {
		// The error, its text and offset, is the sequential decode's.
		if _, serr := r.(io.Seeker).Seek(0, io.SeekStart); serr == nil {
			c, accs, err = decodeFormat(ctx, r, size, opts, stream, nil)
		}
	}
	if err == nil && opts.Progress != nil && size >= 0 {
		opts.Progress(size, size) // the bar ends full even between progress steps
	}
	return c, accs, err
}

func decodeFormat(ctx context.Context, r io.Reader, size int64, opts Options, stream streamMode, par *parInput) (*Capture, []*traceAcc, error) {
	b := newBuilder()
	b.par = par
	b.stream = stream != noStream
	if opts.Trace != nil && !b.stream {
		b.stream = true
		b.sink = newTraceSink(opts.Trace, b)
		defer b.sink.p.wait() // on every way out: the sink has seen all it will
	}
	if b.stream && b.sink == nil && stream.parallel() {
		b.parFold = true
		defer func() { // before the accumulators are read, on every way out
			if b.fold != nil {
				b.fold.wait()
			}
		}()
	}
	in := newByteReader(r, size, opts.Progress)
	if ctx.Done() != nil {
		in.ctx = ctx
	}
	b.offset, b.total = in.offset, size
	b.maxMem = opts.MaxMemory
	b.setLimit(size)
	// Skip leading whitespace (JSON may have it; a pickle never starts with it).
	for {
		if !in.fill(1) {
			if in.err != nil {
				return nil, nil, in.err
			}
			return nil, nil, fmt.Errorf("%w: the file is empty", ErrNotSnapshot)
		}
		c := in.buf[in.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			in.pos++
			continue
		}
		switch {
		case c == opProto || c == '{' || c == '[':
			var snap *snapshot.Snapshot
			var schema, format string
			var err error
			if c == opProto {
				format = FormatPickle
				snap, schema, err = decodePickle(in, b)
			} else {
				format = FormatJSON
				snap, schema, err = decodeJSON(in, b)
			}
			if err != nil {
				return nil, nil, err
			}
			snap.TorchNPU = schema == SchemaTorchNPU
			c := &Capture{Format: format, Schema: schema, SchemaEvidence: b.evidence, Snapshot: snap}
			if b.sink != nil {
				c.TraceLists = b.lists
				if c.TraceLists == nil {
					c.TraceLists = []int{}
				}
			}
			return c, b.accs, nil
		}
		if strings.IndexByte("(}]cld", c) >= 0 {
			return nil, nil, offsetError(in.offset(), errors.New("a pickle of protocol 0 or 1 (torch never writes these); only protocols 2–5 are read"))
		}
		return nil, nil, fmt.Errorf("%w: offset %d: starts with byte 0x%02x, neither a pickle (protocol 2–5) nor JSON", ErrNotSnapshot, in.offset(), c)
	}
}
