package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
	f, mode, err := createTemp(path)
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
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Durable: the bytes reach the disk before the name does, and the
	// rename itself is on disk before the export says it is done, so a
	// crash leaves the old file or the whole new one, never an empty one.
	if err := syncFile(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("%s: the rename may not be on disk: %w", path, err)
	}
	return nil
}

// syncFile and syncDir are the fsyncs of a write (tests watch their order).
var (
	syncFile = (*os.File).Sync
	syncDir  = func(dir string) error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	}
)

// createTemp creates the temporary beside path exclusively (O_EXCL, a
// random name), and returns it at mode 0600 with the mode the output gets
// once complete: 0666 less the umask, as cp and every shell redirection
// create files. The kernel applies the umask to the exclusive create, so
// the umask is read without changing it (umask(2) would, for the whole
// process).
func createTemp(path string) (*os.File, os.FileMode, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	for range 100 {
		name := filepath.Join(dir, fmt.Sprintf(".%s.%d.tmp", base, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		fi, err := f.Stat()
		if err == nil {
			err = f.Chmod(0o600) // nobody else reads a partial export
		}
		if err != nil {
			f.Close()
			os.Remove(name)
			return nil, 0, err
		}
		return f, fi.Mode().Perm(), nil
	}
	return nil, 0, fmt.Errorf("%s: no free temporary name in %s", path, dir)
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
