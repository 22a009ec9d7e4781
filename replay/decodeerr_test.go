package replay

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/safefile"
)

// Errors a caller tests for: ErrTruncated and ErrNotSnapshot with
// errors.Is, the place with errors.As(*safefile.OffsetError); the one-line text
// stays "PATH: offset N: cause".
func TestDecodeErrorsAreTestable(t *testing.T) {
	dir := t.TempDir()
	whole, err := os.ReadFile("testdata/cuda21.json")
	if err != nil {
		t.Fatal(err)
	}
	cutJSON := filepath.Join(dir, "cut.json")
	if err := os.WriteFile(cutJSON, whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		is     error
		offset int64 // -1: any
		field  string
		text   string
	}{
		{path: "testdata/bad_truncated.pickle", is: ErrTruncated, offset: 720, text: "testdata/bad_truncated.pickle: offset 720: unexpected end of file (truncated?)"},
		{path: cutJSON, is: ErrTruncated, offset: -1},
		{path: "testdata/bad_wrong_type.pickle", offset: 82, field: "segment.total_size",
			text: `testdata/bad_wrong_type.pickle: offset 82: segment key "total_size": want int, got str`},
		{path: "testdata/bad_global.pickle", is: ErrNotSnapshot, offset: -1},
		{path: "testdata/bad_protocol1.pickle", offset: 0},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			_, err := DecodeFile(tc.path, Options{})
			if err == nil {
				t.Fatal("decoded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
			var oe *safefile.OffsetError
			if !errors.As(err, &oe) {
				t.Fatalf("no *safefile.OffsetError in %v", err)
			}
			if oe.File != tc.path || (tc.offset >= 0 && oe.Offset != tc.offset) || oe.Field != tc.field {
				t.Errorf("safefile.OffsetError{File %q Offset %d Field %q}, want %q %d %q", oe.File, oe.Offset, oe.Field, tc.path, tc.offset, tc.field)
			}
			if tc.text != "" && err.Error() != tc.text {
				t.Errorf("text %q, want %q", err.Error(), tc.text)
			}
			// Decode (no file name) places it the same way, without File
			f, err := os.Open(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			_, err = Decode(f, -1, Options{})
			if !errors.As(err, &oe) || oe.File != "" {
				t.Errorf("Decode: %v", err)
			}
		})
	}
}

// genLarge writes a generated snapshot of n entries with the benchmark
// generator (Python's pickle).
func genLarge(t *testing.T, n string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "large.pickle")
	cmd := exec.Command("python3", "testdata/gen_bench.py", out, n)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen_bench.py: %v\n%s", err, b)
	}
	return out
}

// cancelAfter is a reader that cancels a context once it has handed out
// at bytes, and counts what it handed out.
type cancelAfter struct {
	r      io.Reader
	at, n  int64
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	m, err := c.r.Read(p)
	c.n += int64(m)
	if c.n >= c.at {
		c.cancel()
	}
	return m, err
}

// A cancelled decode stops within a read chunk and a check interval of
// the cancellation and returns an error wrapping ctx.Err(); one cancelled
// before it starts reads nothing past its first chunk.
func TestDecodeContextCancel(t *testing.T) {
	path := genLarge(t, "150000")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const at = 3 << 20
	if len(data) < at+4*readChunk {
		t.Fatalf("generated file of %d bytes is too small for the test", len(data))
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &cancelAfter{r: bytes.NewReader(data), at: at, cancel: cancel}
	_, err = DecodeContext(ctx, r, int64(len(data)), Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if r.n > at+readChunk+ctxCheckEvery {
		t.Errorf("read %d bytes after cancelling at %d", r.n-at, at)
	}
	var oe *safefile.OffsetError
	if !errors.As(err, &oe) || oe.Offset > r.n {
		t.Errorf("%v: no offset within the %d bytes read", err, r.n)
	}

	// already cancelled: DecodeFileContext names the file
	_, err = DecodeFileContext(ctx, path, Options{})
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("cancelled before the start: %v", err)
	}

	// not cancelled: the same file decodes
	if _, err := DecodeFileContext(context.Background(), path, Options{}); err != nil {
		t.Fatal(err)
	}
}
