package replay

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

func TestCheckComplete(t *testing.T) {
	dir := t.TempDir()
	full, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo.pickle")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want string // "" = complete
	}{
		{write("whole.pickle", full), ""},
		{write("half.pickle", full[:len(full)/2]), "does not end with STOP"},
		{write("snap.json", []byte(`{"segments": [], "device_traces": []}`)), ""},
		{write("list.json", []byte(`[]`)), ""},
		{write("cut.json", []byte(`{"segments": [`)), "unexpected end"},
		{write("other.json", []byte(`{"x": 1}`)), `without "segments"`},
		{write("nested.json", []byte(`{"x": {"segments": []}, "y": "segments"}`)), `without "segments"`},
		{write("spaced.json", []byte(" \n\t{\"a\": [1, {\"b\": 2}], \"segments\": []}\n")), ""},
		{write("trailing.json", []byte(`{"segments": []} {}`)), "data after the JSON value"},
		{write("cutlist.json", []byte(`[1, 2`)), "unexpected end"},
		{write("text.txt", []byte("hello")), "neither a pickle nor JSON"},
		{fifo, "not a regular file"},
	} {
		t.Run(c.path, func(t *testing.T) {
			err := CheckComplete(c.path)
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("%s: got %v, want %q", filepath.Base(c.path), err, c.want)
			}
		})
	}
}

// A writer cut off right after a byte that happens to be STOP ('.') left
// an incomplete pickle; the opcode walk tells, the last byte cannot.
func TestCheckCompleteCutAtDot(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"cuda-2.0-flexgen-oom_snapshot.pickle", "cuda-2026-assignment2-memory_snapshot.pickle"} {
		full, err := os.ReadFile(fixture.Path(t, "snapshots/"+name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		os.WriteFile(p, full, 0o644)
		if err := CheckComplete(p); err != nil {
			t.Fatalf("%s: complete fixture refused: %v", name, err)
		}
		cuts := 0
		for i := 1; i < len(full)-1 && cuts < 50; i++ {
			if full[i-1] != '.' {
				continue
			}
			cuts++
			os.WriteFile(p, full[:i], 0o644)
			if err := CheckComplete(p); err == nil {
				t.Fatalf("%s cut at %d (after a '.') passed as complete", name, i)
			}
		}
		if cuts == 0 {
			t.Fatalf("%s: no '.' byte to cut after", name)
		}
	}
}

// The skim reads through its own buffer: fed one byte per Read (every
// argument then skipped past the buffer) or all at once, it accepts the
// whole pickle and refuses every cut.
func TestSkimPickleReads(t *testing.T) {
	full, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	readers := map[string]func(b []byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	}
	for name, r := range readers {
		if err := skimPickle(r(full), int64(len(full))); err != nil {
			t.Fatalf("%s: complete pickle refused: %v", name, err)
		}
		for cut := 1; cut < len(full); cut += 4999 {
			if err := skimPickle(r(full[:cut]), int64(cut)); err == nil {
				t.Fatalf("%s: cut at %d passed as complete", name, cut)
			}
		}
	}
}

// Frames are passed whole, so a pickle cut exactly where a frame ends
// must still fail, and a bad opcode in the last frame is still found.
func TestSkimPickleFrames(t *testing.T) {
	full, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	var ends []int // where each frame ends, following the FRAME headers from the start
	for off := 2; off+9 <= len(full) && full[off] == opFrame; {
		off += 9 + int(binary.LittleEndian.Uint64(full[off+1:]))
		ends = append(ends, off)
	}
	if len(ends) < 2 {
		t.Fatalf("want a framed fixture, found %d frames", len(ends))
	}
	for _, cut := range ends[:len(ends)-1] {
		if err := skimPickle(bytes.NewReader(full[:cut]), int64(cut)); err == nil {
			t.Fatalf("cut at the end of a frame (%d of %d bytes) passed as complete", cut, len(full))
		}
	}
	bad := bytes.Clone(full)
	bad[len(bad)-2] = 'c' // GLOBAL just before STOP, inside the last frame
	if err := skimPickle(bytes.NewReader(bad), int64(len(bad))); err == nil || !strings.Contains(err.Error(), "opcode") {
		t.Fatalf("a bad opcode in the last frame: %v", err)
	}
}

// A large JSON file is checked token by token, not read whole: the heap
// the check reserves stays far below the file's size.
func TestCheckCompleteJSONBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	body := bytes.Repeat([]byte(`{"a": 1},`), 3<<20) // 27 MiB
	if err := os.WriteFile(p, append(append([]byte(`{"segments": [`), body...), []byte(`{"a": 1}]}`)...), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := CheckComplete(p); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapSys) - int64(before.HeapSys); grew > 16<<20 {
		t.Errorf("the check reserved %d MiB more heap for a 27 MiB file", grew>>20)
	}
}
