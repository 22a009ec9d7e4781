package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
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
	code, _, errOut := captureRun(t, "export", in, "--to", "json", "--pretty", "-o", out)
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
	// The compact form (the default) writes the shared stack once: within
	// 3× the pickle (JSON repeats each entry's keys, the pickle memoizes
	// them), and it reads back the same.
	compact := filepath.Join(dir, "compact.json")
	if code, _, errOut := captureRun(t, "export", in, "--to", "json", "-o", compact); code != 0 {
		t.Fatalf("compact export: exit %d %q", code, errOut)
	}
	cfi, _ := os.Stat(compact)
	if cfi.Size() > 3*fi.Size() {
		t.Errorf("compact JSON is %d bytes, over 3× the pickle's %d", cfi.Size(), fi.Size())
	}
	t.Logf("compact JSON of the same pickle: %d bytes", cfi.Size())
	_, a, _ := captureRun(t, "stats", "--json", in)
	_, b, _ := captureRun(t, "stats", "--json", compact)
	a = strings.Replace(a, in, "X", 1)
	b = strings.Replace(strings.Replace(b, compact, "X", 1), `"format": "json"`, `"format": "pickle"`, 1)
	if a != b {
		t.Errorf("stats of the compact export differ:\n%s\n%s", a, b)
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

// Snapshots with impossible values decode, but stats and check warn naming
// the first offender, and --strict turns the warning into an error.
func TestImpossibleValuesWarn(t *testing.T) {
	dir := t.TempDir()
	seg := `{'device': 0, 'address': %v, 'total_size': %v, 'allocated_size': 0, 'active_size': 0, 'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'blocks': %s}`
	blk := `{'size': %d, 'requested_size': 0, 'state': 'inactive', 'address': %d}`
	for _, c := range []struct{ name, segs, want string }{
		{"negative", "[" + fmt.Sprintf(seg, 1<<20, 4096, "["+fmt.Sprintf(blk, -5, 1<<20)+"]") + "]",
			"segment 0 (device 0, address 0x100000): block 0 size -5 is impossible"},
		{"two63", "[" + fmt.Sprintf(seg, 1<<20, "2**63-1", "[]") + "]",
			"segment 0 (device 0, address 0x100000): total_size 9223372036854775807 is impossible"},
		{"outside", "[" + fmt.Sprintf(seg, 1<<20, 4096, "["+fmt.Sprintf(blk, 4096, 1<<21)+"]") + "]",
			"block 0 [0x200000, +4096) lies outside its segment [0x100000, +4096)"},
		{"overlap-blocks", "[" + fmt.Sprintf(seg, 1<<20, 8192, "["+fmt.Sprintf(blk, 4096, 1<<20)+","+fmt.Sprintf(blk, 4096, 1<<20+512)+"]") + "]",
			"blocks 0 and 1 overlap at 0x100200"},
		{"overlap-segments", "[" + fmt.Sprintf(seg, 1<<20, 8192, "[]") + "," + fmt.Sprintf(seg, 1<<20+4096, 8192, "[]") + "]",
			"segments 0 and 1 of device 0 overlap at 0x101000"},
	} {
		p := filepath.Join(dir, c.name+".pickle")
		pyPickle(t, p, "snap = {'segments': "+c.segs+", 'device_traces': [[]]}")
		code, _, errOut := captureRun(t, "stats", p)
		if code != 0 || !strings.Contains(errOut, "npumon: warning: "+p+": impossible values") || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: stats exit %d, stderr %q", c.name, code, errOut)
		}
		code, _, errOut = captureRun(t, "check", "--strict", "--no-oom", p)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "warning") {
			t.Errorf("%s: check --strict exit %d, stderr %q", c.name, code, errOut)
		}
	}
	// a sound snapshot says nothing
	p := filepath.Join(dir, "sound.pickle")
	pyPickle(t, p, "snap = {'segments': ["+fmt.Sprintf(seg, 1<<20, 8192, "["+fmt.Sprintf(blk, 4096, 1<<20)+","+fmt.Sprintf(blk, 4096, 1<<20+4096)+"]")+"], 'device_traces': [[]]}")
	if code, _, errOut := captureRun(t, "stats", "--strict", p); code != 0 || errOut != "" {
		t.Errorf("sound: exit %d, stderr %q", code, errOut)
	}
}
