package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/testdata/fixture"
)

// pyPickle runs a Python snippet that pickles `snap` (protocol 4) to path.
func pyPickle(t *testing.T, path, body string) {
	t.Helper()
	py := fixture.Tool(t, "python3", "python3")
	src := "import pickle, sys\n" + body + "\nwith open(sys.argv[1], 'wb') as f:\n    pickle.dump(snap, f, protocol=4)\n"
	if out, err := exec.Command(py, "-c", src, path).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
}

// A small pickle whose entries all share one memoized 2000-frame stack
// would expand to ~5 GB of JSON: export refuses at once and writes nothing.
func TestExportRefusesJSONExpansion(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "shared.pickle")
	pyPickle(t, in, `
frames = [{'filename': '/opt/train/models/very/long/path/module_%d.py' % i, 'line': i, 'name': 'forward_%d' % i} for i in range(2000)]
trace = [{'action': 'alloc', 'addr': 4096 * (i + 1), 'size': 512, 'stream': 0, 'time_us': 1000 + i, 'frames': frames} for i in range(30000)]
snap = {'segments': [], 'device_traces': [trace]}`)
	fi, _ := os.Stat(in)
	out := filepath.Join(dir, "out.json")
	start := time.Now()
	code, _, errOut := captureRun(t, "export", in, "--to", "json", "-o", out)
	if code == 0 || !strings.Contains(errOut, "over --max-size") || !strings.Contains(errOut, "nothing written") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	t.Logf("%d-byte pickle refused in %v: %s", fi.Size(), time.Since(start), strings.TrimSpace(errOut))
	// a limit the expansion fits in writes it
	code, _, errOut = captureRun(t, "export", in, "--to", "pickle", "-o", filepath.Join(dir, "again.pickle"))
	if code != 0 {
		t.Fatalf("pickle export: exit %d %q", code, errOut)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("left %v", ents)
	}
}

// Every command that reads a file refuses a FIFO named like its input at
// once instead of blocking on it.
func TestCommandsRefuseFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "snap.pickle")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"stats", fifo},
		{"stats", "--json", fifo},
		{"check", "--no-oom", fifo},
		{"export", fifo, "--to", "json", "-o", filepath.Join(dir, "o.json")},
		{"whatif", fifo},
		{"holders", fifo},
		{"explain", fifo},
		{"diff", fifo, fifo},
		{"replay", "--headless", "1s", fifo},
	} {
		done := make(chan string, 1)
		go func() {
			code, _, errOut := captureRun(t, args...)
			if code == 0 {
				errOut = "exit 0: " + errOut
			}
			done <- errOut
		}()
		select {
		case errOut := <-done:
			if !strings.Contains(errOut, "not a regular file") {
				t.Errorf("%v: stderr %q, want a not-a-regular-file error", args, errOut)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%v blocked on a FIFO", args)
		}
	}
}
