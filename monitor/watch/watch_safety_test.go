package watch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/monitor/store"
)

// A slow writer whose pieces end right after '.' bytes (the STOP opcode's
// value) produces partial pickles that look finished by their last byte;
// the watcher reports the file once, complete, and never a partial one.
func TestWatchSlowWriterCutAtDots(t *testing.T) {
	snap, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	var cuts []int
	for i := 1; i < len(snap)-1 && len(cuts) < 5; i++ {
		if snap[i-1] == '.' && (len(cuts) == 0 || i-cuts[len(cuts)-1] > len(snap)/10) {
			cuts = append(cuts, i)
		}
	}
	if len(cuts) < 3 {
		t.Fatalf("only %d cut points after '.'", len(cuts))
	}
	dir := t.TempDir()
	w, err := Watch(dir, Options{Settle: 40 * time.Millisecond, GiveUp: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := filepath.Join(dir, "slow.pickle")
	writeSettling(t, w, dir, p, snap, cuts) // each partial file settles and is checked
	e := nextEvent(t, w, kind(EventSnapshot))
	if e.Size != int64(len(snap)) {
		t.Fatalf("reported at %d bytes of %d: a partial pickle", e.Size, len(snap))
	}
	// not reported again: everything the watcher had to say about it is
	// out before two later snapshots are (barrier)
	for _, e := range barrier(t, w, dir) {
		if e.Kind == EventSnapshot && e.Path == p {
			t.Fatalf("reported again: %+v", e)
		}
	}
}

// A 2 GiB sparse *.pickle is refused from its size, costing no memory.
func TestWatchRefusesHugeFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "huge.pickle")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0x80, 0x04})
	f.WriteAt([]byte{'.'}, 2<<30-1) // sparse: no disk used
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st := store.New(store.Options{})
	d := NewDirSource(dir, st, DirOptions{Follow: true})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	poll.Until(t, "the size error", func() bool {
		for _, e := range d.Errors() {
			if strings.Contains(e, "over the 1024.00 MiB limit") {
				return true
			}
		}
		return false
	})
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("allocated %d MiB for a refused file", grew>>20)
	}
	if d.Current() != "" {
		t.Fatal("opened a refused file")
	}
}

// manyFiles is how many files the directory tests write: 10,000, or 2,000
// with -short (make test-arm64 and the standalone pass, where the race pass
// has already run the full count).
func manyFiles() int {
	if testing.Short() {
		return 2_000
	}
	return 10_000
}

// A directory of 10,000 files: the scan reports them all, then the newest
// snapshot opens (the scan's end is an event, not a pause).
func TestDirSourceManyExisting(t *testing.T) {
	dir := t.TempDir()
	n := manyFiles()
	body := []byte(`{"segments": [{"device": 0, "address": 4096, "total_size": 2097152, "blocks": [{"address": 4096, "size": 2097152, "state": "inactive"}]}], "device_traces": [[]]}`)
	for i := range n {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("snap_%05d.json", i)), body, 0o644)
	}
	st := store.New(store.Options{})
	d := NewDirSource(dir, st, DirOptions{Follow: true})
	start := time.Now()
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	want := filepath.Join(dir, fmt.Sprintf("snap_%05d.json", n-1))
	poll.Within(t, 3*time.Minute, fmt.Sprintf("the newest of %d to open", n), func() bool { return d.Current() == want })
	if got := len(d.List()); got != n {
		t.Fatalf("listed %d captures, want %d", got, n)
	}
	t.Logf("%d existing files scanned and the newest opened in %v", n, time.Since(start))
}

// 10,000 snapshots landing while watched are all seen; with follow, the
// newest ends up open (not each one decoded in turn).
func TestDirSourceManyNew(t *testing.T) {
	dir := t.TempDir()
	st := store.New(store.Options{})
	d := NewDirSource(dir, st, DirOptions{Follow: true})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	select { // the scan is over
	case <-d.Ready():
	case <-time.After(time.Minute):
		t.Fatal("the scan of an empty directory never ended")
	}
	n := manyFiles()
	body := []byte(`{"segments": [], "device_traces": [[]]}`)
	start := time.Now()
	for i := range n {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("new_%05d.json", i)), body, 0o644)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(d.List()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d new files seen after 3 minutes", len(d.List()), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// files landing together are reported in any order: the last one
	// reported is the newest capture
	poll.Within(t, 3*time.Minute, "the newest to open", func() bool { l := d.List(); return d.Current() == l[len(l)-1].Path })
	t.Logf("%d new files seen in %v", n, time.Since(start))
}

// An existing 21 MB JSON snapshot opens (its check takes longer than the
// old fixed scan pause).
func TestDirSourceLargeExistingJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the 21 MB JSON file is the race pass's (make test-unit)")
	}
	py := fixture.Tool(t, "python3", "python3")
	dir := t.TempDir()
	p := filepath.Join(dir, "big.json")
	src := `import json, sys
trace = []
for i in range(25000):
    a = 4096 + (i % 1000) * 512
    trace.append({'action': 'alloc', 'addr': a, 'size': 512, 'stream': 0, 'time_us': 1700000000000000 + 2*i, 'frames': [{'filename': '/opt/jobs/train/models/transformer/layers/attention_block_%d.py' % k, 'line': i % 50, 'name': 'forward'} for k in range(3)]})
    trace.append({'action': 'free_completed', 'addr': a, 'size': 512, 'stream': 0, 'time_us': 1700000000000001 + 2*i, 'frames': [{'filename': '/opt/jobs/train/models/transformer/layers/attention_block_%d.py' % k, 'line': i % 50, 'name': 'backward'} for k in range(3)]})
json.dump({'segments': [], 'device_traces': [trace]}, open(sys.argv[1], 'w'))
`
	if out, err := exec.Command(py, "-c", src, p).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	fi, _ := os.Stat(p)
	if fi.Size() < 20<<20 {
		t.Fatalf("generated only %d bytes", fi.Size())
	}
	st := store.New(store.Options{})
	d := NewDirSource(dir, st, DirOptions{Follow: true})
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	poll.Within(t, 3*time.Minute, "the JSON snapshot to open", func() bool { return d.Current() == p })
	if st.Len(0) != 50000 {
		t.Fatalf("store holds %d entries (errors %v)", st.Len(0), d.Errors())
	}
}
