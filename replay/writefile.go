package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
)

// WriteOptions tune WriteFileWith.
type WriteOptions struct {
	// Context cancels the write (an interrupt): the temporary is removed.
	Context context.Context
	// MaxBytes fails the write once the output would pass this many bytes
	// (0: no limit); the temporary is removed.
	MaxBytes int64
}

// ErrTooLarge is wrapped by WriteFileWith's error when the output passes
// WriteOptions.MaxBytes.
var ErrTooLarge = errors.New("output over the size limit")

// WriteFile writes s to path with write (WritePickle or WriteJSON); see
// WriteFileWith.
func WriteFile(path string, s *snapshot.Snapshot, write func(io.Writer, *snapshot.Snapshot, ExportSchema) error, schema ExportSchema) error {
	return WriteFileWith(path, s, write, schema, WriteOptions{})
}

// WriteFileWith writes s to path with write through a temporary file that
// is created exclusively (O_EXCL, a random name, mode 0600) in the same
// directory and renamed into place once complete. So a directory watcher
// never sees half a file under the final name; a failed, cancelled or
// over-limit write leaves nothing behind; concurrent writers of one path
// never share a temporary (the last rename wins, whole); and nothing
// planted at a predictable name (a symlink) is followed. path itself, if
// it is a symlink, is replaced rather than written through; a path that
// is a directory, FIFO or device is refused.
func WriteFileWith(path string, s *snapshot.Snapshot, write func(io.Writer, *snapshot.Snapshot, ExportSchema) error, schema ExportSchema, o WriteOptions) (err error) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s: exists and is not a regular file; not replacing it", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := &guardWriter{w: f, ctx: o.Context, max: o.MaxBytes}
	if err := write(w, s, schema); err != nil {
		if w.err != nil {
			err = w.err
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return nil
}

// guardWriter stops a write on cancellation or past a size limit.
type guardWriter struct {
	w   io.Writer
	ctx context.Context
	max int64
	n   int64
	err error
}

func (g *guardWriter) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.ctx != nil && g.ctx.Err() != nil {
		g.err = fmt.Errorf("write stopped: %w", g.ctx.Err())
		return 0, g.err
	}
	if g.max > 0 && g.n+int64(len(p)) > g.max {
		g.err = fmt.Errorf("%w (%s)", ErrTooLarge, bytesize.Torch(g.max))
		return 0, g.err
	}
	n, err := g.w.Write(p)
	g.n += int64(n)
	return n, err
}
