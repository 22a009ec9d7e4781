package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	snap := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{{}}}
	out := filepath.Join(dir, "out.pickle")
	if err := WriteFile(out, snap, WritePickle, ExportDict); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeFile(out, Options{}); err != nil {
		t.Fatalf("written file does not decode: %v", err)
	}
	broken := func(w io.Writer, _ *snapshot.Snapshot, _ ExportSchema) error {
		w.Write([]byte{0x80, 4})
		return errors.New("disk full")
	}
	if err := WriteFile(filepath.Join(dir, "bad.pickle"), snap, broken, ExportDict); err == nil {
		t.Fatal("a failed write reported success")
	}
	wantOnly(t, dir, "out.pickle")
}

// wantOnly fails unless dir holds exactly the named entries.
func wantOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("directory holds %v, want %v (no temporaries, no half file)", got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("directory holds %v, want %v", got, names)
		}
	}
}

// A symlink planted where the temporary used to be (a predictable name)
// must not get its target overwritten; a symlink at the output is replaced,
// not written through.
func TestWriteFileDoesNotFollowPlantedLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("precious"), 0o644)
	os.Symlink(victim, filepath.Join(dir, ".out.json.tmp"))
	os.Symlink(victim, filepath.Join(dir, "link.json"))
	snap := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{{}}}
	for _, name := range []string{"out.json", "link.json"} {
		if err := WriteFile(filepath.Join(dir, name), snap, WriteJSON, ExportDict); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("symlink target overwritten: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "link.json")); fi.Mode()&os.ModeSymlink != 0 {
		t.Fatal("link.json still a symlink: the write went through it")
	}
	fifo := filepath.Join(dir, "fifo.json")
	syscall.Mkfifo(fifo, 0o600)
	if err := WriteFile(fifo, snap, WriteJSON, ExportDict); err == nil {
		t.Fatal("wrote over a FIFO")
	}
}

// Concurrent writers of one path: every run succeeds, the result is one
// whole export, and no temporary is left.
func TestWriteFileConcurrent(t *testing.T) {
	c := mustDecode(t, fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	var want bytes.Buffer
	if err := WriteJSON(&want, c.Snapshot, ExportDict); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.json")
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- WriteFile(out, c.Snapshot, WriteJSON, ExportDict)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("concurrent writes left %d bytes, want the %d-byte export", len(got), want.Len())
	}
	wantOnly(t, dir, "out.json")
}

// Over the limit or cancelled: an error, and nothing left behind.
func TestWriteFileLimitAndCancel(t *testing.T) {
	c := mustDecode(t, fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	dir := t.TempDir()
	err := WriteFileWith(filepath.Join(dir, "big.json"), c.Snapshot, WriteJSON, ExportDict, WriteOptions{MaxBytes: 4096})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WriteFileWith(filepath.Join(dir, "c.json"), c.Snapshot, WriteJSON, ExportDict, WriteOptions{Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled write: err = %v", err)
	}
	wantOnly(t, dir)
}

// JSONSize is the exact size WriteJSON produces.
func TestJSONSize(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.pickle")
	files = append(files, fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	for _, f := range files {
		c, err := DecodeFile(f, Options{})
		if err != nil {
			continue
		}
		for _, sch := range []ExportSchema{ExportDict, ExportList113} {
			var b bytes.Buffer
			WriteJSON(&b, c.Snapshot, sch)
			if n := JSONSize(c.Snapshot, sch); n != int64(b.Len()) {
				t.Errorf("%s schema %d: JSONSize %d, WriteJSON wrote %d", f, sch, n, b.Len())
			}
		}
	}
}

// An export gets 0666 less the umask, as cp would create it (snapshots
// name source paths: a umask of 077 must keep them private), never a fixed
// 0644.
func TestWriteFileHonoursUmask(t *testing.T) {
	snap := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{{}}}
	for _, c := range []struct{ umask, want int }{{0o077, 0o600}, {0o022, 0o644}, {0o002, 0o664}, {0o027, 0o640}} {
		dir := t.TempDir()
		out := filepath.Join(dir, "out.pickle")
		old := syscall.Umask(c.umask)
		err := WriteFile(out, snap, WritePickle, ExportDict)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := int(fi.Mode().Perm()); got != c.want {
			t.Errorf("umask %03o: mode %03o, want %03o", c.umask, got, c.want)
		}
	}
}

// The file is fsynced before the rename and its directory after it.
func TestWriteFileDurable(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.pickle")
	var order []string
	oldFile, oldDir := syncFile, syncDir
	defer func() { syncFile, syncDir = oldFile, oldDir }()
	exists := func() bool { _, err := os.Stat(out); return err == nil }
	syncFile = func(f *os.File) error {
		order = append(order, fmt.Sprintf("file renamed=%v", exists()))
		return f.Sync()
	}
	syncDir = func(d string) error {
		order = append(order, fmt.Sprintf("dir %s renamed=%v", filepath.Base(d), exists()))
		return oldDir(d)
	}
	snap := &snapshot.Snapshot{DeviceTraces: [][]snapshot.TraceEntry{{}}}
	if err := WriteFile(out, snap, WritePickle, ExportDict); err != nil {
		t.Fatal(err)
	}
	want := []string{"file renamed=false", "dir " + filepath.Base(dir) + " renamed=true"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("syncs %q, want %q", order, want)
	}
}
