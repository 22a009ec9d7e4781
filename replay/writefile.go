package replay

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/npumon/npumon/allocator"
)

// WriteFile writes s to path with write (WritePickle or WriteJSON) through a
// hidden temporary in the same directory, renamed into place once complete,
// so that a directory watcher never sees half a file under the final name
// and a failed write leaves nothing behind.
func WriteFile(path string, s *allocator.Snapshot, write func(io.Writer, *allocator.Snapshot, ExportSchema) error, schema ExportSchema) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := write(f, s, schema); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
