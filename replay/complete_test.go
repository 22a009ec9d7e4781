package replay

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/npumon/npumon/testdata/fixture"
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
		{write("text.txt", []byte("hello")), "neither a pickle nor JSON"},
		{fifo, "not a regular file"},
	} {
		err := CheckComplete(c.path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", filepath.Base(c.path), err, c.want)
		}
	}
}
