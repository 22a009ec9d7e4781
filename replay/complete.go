package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
)

// CheckComplete tells cheaply whether a snapshot file looks completely
// written: a pickle must end with the STOP opcode, a JSON file must parse to
// a snapshot shape (a dict with "segments", or a list). It never blocks on a
// FIFO or device named like a snapshot. Directory watchers call it before
// the full decode.
func CheckComplete(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", p)
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("%s: too short for a snapshot", p)
	}
	if head[0] == opProto {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err != nil || last[0] != '.' {
			return fmt.Errorf("%s: pickle does not end with STOP (still being written?)", p)
		}
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') {
		return fmt.Errorf("%s: neither a pickle nor JSON", p)
	}
	var shape struct {
		Segments json.RawMessage `json:"segments"`
	}
	if b[0] == '[' {
		var v []json.RawMessage
		if err := json.Unmarshal(b, &v); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if shape.Segments == nil {
		return fmt.Errorf("%s: JSON without \"segments\": not a snapshot", p)
	}
	return nil
}
