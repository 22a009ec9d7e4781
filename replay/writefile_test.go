package replay

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/allocator"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	snap := &allocator.Snapshot{DeviceTraces: [][]allocator.TraceEntry{{}}}
	out := filepath.Join(dir, "out.pickle")
	if err := WriteFile(out, snap, WritePickle, ExportDict); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeFile(out, Options{}); err != nil {
		t.Fatalf("written file does not decode: %v", err)
	}
	broken := func(w io.Writer, _ *allocator.Snapshot, _ ExportSchema) error {
		w.Write([]byte{0x80, 4})
		return errors.New("disk full")
	}
	if err := WriteFile(filepath.Join(dir, "bad.pickle"), snap, broken, ExportDict); err == nil {
		t.Fatal("a failed write reported success")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "out.pickle" {
		t.Fatalf("directory holds %v, want only out.pickle (no temporaries, no half file)", ents)
	}
}
