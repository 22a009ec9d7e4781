package watch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// next waits for the next event matching keep (others are collected).
func nextEvent(t *testing.T, w *Watcher, keep func(Event) bool) Event {
	t.Helper()
	deadline := time.After(time.Minute) // only bounds a hang
	for {
		select {
		case e, ok := <-w.Events:
			if !ok {
				t.Fatal("events closed")
			}
			if keep(e) {
				return e
			}
		case <-deadline:
			t.Fatal("timed out waiting for a watch event")
		}
	}
}

func kind(k EventKind) func(Event) bool { return func(e Event) bool { return e.Kind == k } }

// barrier writes two marker snapshots into dir, one after the other was
// reported, and returns every event that came before the second marker's:
// all the watcher had to report about what happened before barrier was
// called. A test that something is NOT reported checks that list instead
// of waiting a fixed time. The watcher reports a settled file at the tick
// that sees it settled, so whatever the first marker's tick reported is out
// before the second marker's event.
func barrier(t *testing.T, w *Watcher, dir string) []Event {
	t.Helper()
	var seen []Event
	for i := range 2 {
		p := filepath.Join(dir, fmt.Sprintf("barrier-%d-%d.json", time.Now().UnixNano(), i))
		if err := os.WriteFile(p, []byte(`{"segments": [], "device_traces": []}`), 0o644); err != nil {
			t.Fatal(err)
		}
		nextEvent(t, w, func(e Event) bool {
			if e.Kind == EventSnapshot && e.Path == p {
				return true
			}
			seen = append(seen, e)
			return false
		})
	}
	return seen
}

// writePieces writes b in n pieces with a pause between them.
func writePieces(t *testing.T, path string, b []byte, n int, pause time.Duration) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	step := (len(b) + n - 1) / n
	for i := 0; i < len(b); i += step {
		if _, err := f.Write(b[i:min(i+step, len(b))]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(pause)
	}
}

// writeSettling writes b to path in pieces ending at cuts (then the rest),
// and after each partial piece waits until the watcher has seen that
// partial file settle (barrier), failing if it reported it as a snapshot.
func writeSettling(t *testing.T, w *Watcher, dir, path string, b []byte, cuts []int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prev := 0
	for _, c := range append(cuts, len(b)) {
		if _, err := f.Write(b[prev:c]); err != nil {
			t.Fatal(err)
		}
		prev = c
		if c == len(b) {
			break
		}
		for _, e := range barrier(t, w, dir) {
			if (e.Kind == EventSnapshot || e.Kind == EventMemUsage) && e.Path == path {
				t.Fatalf("reported at %d bytes of %d: a partial file (%+v)", c, len(b), e)
			}
		}
	}
}

// evenCuts cuts n bytes into k pieces.
func evenCuts(n, k int) []int {
	var cuts []int
	for i := 1; i < k; i++ {
		cuts = append(cuts, n*i/k)
	}
	return cuts
}

// A real snapshot written in pieces, each of which settles, is
// reported once, complete; the partial versions are never reported.
func TestWatchSnapshotWrittenInPieces(t *testing.T) {
	snap, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := Watch(dir, Options{Settle: 60 * time.Millisecond, GiveUp: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := filepath.Join(dir, "oom_snapshot_4242_20261129120000.pickle")
	writeSettling(t, w, dir, p, snap, evenCuts(len(snap), 4))
	e := nextEvent(t, w, kind(EventSnapshot))
	if e.Path != p || e.Size != int64(len(snap)) || e.Existing {
		t.Fatalf("event %+v, want %s with %d bytes", e, p, len(snap))
	}
	// rename it: the old name is removed, the new one reported
	p2 := filepath.Join(dir, "kept.pickle")
	if err := os.Rename(p, p2); err != nil {
		t.Fatal(err)
	}
	e = nextEvent(t, w, func(e Event) bool { return e.Kind == EventRemoved || e.Kind == EventSnapshot })
	e2 := nextEvent(t, w, func(e Event) bool { return e.Kind == EventRemoved || e.Kind == EventSnapshot })
	if e.Kind == EventSnapshot {
		e, e2 = e2, e
	}
	if e.Kind != EventRemoved || e.Path != p || e2.Kind != EventSnapshot || e2.Path != p2 {
		t.Fatalf("after rename: %+v, %+v", e, e2)
	}
	os.Remove(p2)
	if e := nextEvent(t, w, kind(EventRemoved)); e.Path != p2 {
		t.Fatalf("after delete: %+v", e)
	}
}

func TestWatchJSONAndExisting(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "before.json")
	os.WriteFile(old, []byte(`{"segments": [], "device_traces": []}`), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644)
	w, err := Watch(dir, Options{Settle: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if e := nextEvent(t, w, kind(EventSnapshot)); e.Path != old || !e.Existing {
		t.Fatalf("existing: %+v", e)
	}
	p := filepath.Join(dir, "live.json")
	body := []byte(`{"segments": [{"device": 0, "address": 1, "total_size": 2, "blocks": []}], "device_traces": [[]]}`)
	writeSettling(t, w, dir, p, body, evenCuts(len(body), 3)) // half a JSON document never parses
	if e := nextEvent(t, w, kind(EventSnapshot)); e.Path != p || e.Size != int64(len(body)) {
		t.Fatalf("new json: %+v", e)
	}
}

// Garbage that never becomes a snapshot is reported, not fatal.
func TestWatchUndecodableAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	w, err := Watch(dir, Options{Settle: 40 * time.Millisecond, GiveUp: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	junk := filepath.Join(dir, "junk.pickle")
	os.WriteFile(junk, []byte("\x80\x04this is not finished"), 0o644)
	e := nextEvent(t, w, kind(EventError))
	if e.Path != junk || !strings.Contains(e.Err.Error(), "not a complete snapshot") {
		t.Fatalf("junk: %+v", e)
	}
	if os.Getuid() != 0 { // root reads anything
		locked := filepath.Join(dir, "locked.json")
		os.WriteFile(locked, []byte(`{"segments": []}`), 0o000)
		e = nextEvent(t, w, kind(EventError))
		if e.Path != locked {
			t.Fatalf("unreadable: %+v", e)
		}
	}
	// a FIFO named like a snapshot must not block the watcher (opening it
	// for reading would wait for a writer)
	fifo := filepath.Join(dir, "pipe.pickle")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	e = nextEvent(t, w, kind(EventError))
	if e.Path != fifo || !strings.Contains(e.Err.Error(), "not a regular file") {
		t.Fatalf("fifo: %+v", e)
	}
	// still watching
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`[]`), 0o644)
	if e := nextEvent(t, w, kind(EventSnapshot)); e.Path != good {
		t.Fatalf("after errors: %+v", e)
	}
}

// A profiler directory appearing, its FRAMEWORK files growing in odd
// pieces, then analyse.done.
func TestWatchProfilerDir(t *testing.T) {
	src := "../../profiler/testdata/framework/gen_4242_20261129120000123_ascend_pt/FRAMEWORK/torch.op_range"
	rec, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := Watch(dir, Options{Settle: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	prof := filepath.Join(dir, "host_77_20261129130000123_ascend_pt")
	os.Mkdir(prof, 0o750)
	if e := nextEvent(t, w, kind(EventProfilerDir)); e.Path != prof {
		t.Fatalf("dir: %+v", e)
	}
	fw := filepath.Join(prof, "FRAMEWORK")
	os.Mkdir(fw, 0o750)
	barrier(t, w, dir) // the watcher has seen FRAMEWORK appear
	f := filepath.Join(fw, "torch.op_range")
	writePieces(t, f, rec, 5, 60*time.Millisecond)
	var last int64
	for last < int64(len(rec)) {
		e := nextEvent(t, w, kind(EventFrameworkGrow))
		if e.Path != f || e.Dir != prof || e.Size <= last {
			t.Fatalf("grow: %+v after %d", e, last)
		}
		last = e.Size
	}
	out := filepath.Join(prof, "ASCEND_PROFILER_OUTPUT")
	os.Mkdir(out, 0o750)
	barrier(t, w, dir) // and its output directory
	os.WriteFile(filepath.Join(out, "analyse.done"), nil, 0o640)
	if e := nextEvent(t, w, kind(EventAnalyseDone)); e.Dir != prof {
		t.Fatalf("analyse.done: %+v", e)
	}
	os.RemoveAll(prof)
	if e := nextEvent(t, w, func(e Event) bool { return e.Kind == EventRemoved && e.Path == prof }); e.Dir != prof {
		t.Fatalf("removed: %+v", e)
	}
}

// The watched directory vanishing is reported; it is picked up again.
func TestWatchRootVanishes(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "snaps")
	os.Mkdir(dir, 0o755)
	w, err := Watch(dir, Options{Settle: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.RemoveAll(dir)
	if e := nextEvent(t, w, kind(EventError)); !strings.Contains(e.Err.Error(), "vanished") {
		t.Fatalf("vanish: %+v", e)
	}
	os.Mkdir(dir, 0o755)
	// written at once: before the watcher sees the directory again, its
	// rescan finds the file; after, fsnotify reports it
	p := filepath.Join(dir, "back.json")
	os.WriteFile(p, []byte(`{"segments": []}`), 0o644)
	if e := nextEvent(t, w, kind(EventSnapshot)); e.Path != p {
		t.Fatalf("after return: %+v", e)
	}
	if _, err := Watch(filepath.Join(parent, "missing"), Options{}); err == nil {
		t.Fatal("Watch of a missing directory succeeded")
	}
}

// TestWatchMemUsage: torch_npu's memUsageInfo CSVs are reported as such
// (never as snapshots), existing ones and new ones; one that does not
// parse is an error naming its line.
func TestWatchMemUsage(t *testing.T) {
	dir := t.TempDir()
	const body = "moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,1228,1536\n"
	old := filepath.Join(dir, "device_0_memUsageInfo_20261201103016.csv")
	os.WriteFile(old, []byte(body), 0o644)
	os.WriteFile(filepath.Join(dir, "other.csv"), []byte(body), 0o644) // not torch_npu's name
	w, err := Watch(dir, Options{Settle: 40 * time.Millisecond, GiveUp: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if e := nextEvent(t, w, kind(EventMemUsage)); e.Path != old || !e.Existing {
		t.Fatalf("existing: %+v", e)
	}
	p := filepath.Join(dir, "device_1_memUsageInfo_20261201103020.csv")
	writeSettling(t, w, dir, p, []byte(body), []int{30}) // a cut row does not parse
	if e := nextEvent(t, w, kind(EventMemUsage)); e.Path != p || e.Existing || e.Size != int64(len(body)) {
		t.Fatalf("new: %+v", e)
	}
	bad := filepath.Join(dir, "device_2_memUsageInfo_20261201103020.csv")
	os.WriteFile(bad, []byte("moduleName,curMemSize(MB),memPeakSize(MB)\nHCCL,x,1\n"), 0o644)
	e := nextEvent(t, w, func(e Event) bool { return e.Path == bad })
	if e.Kind != EventError || !strings.Contains(e.Err.Error(), `line 2: curMemSize(MB): "x" is not a non-negative number of MB`) {
		t.Fatalf("bad: %+v", e)
	}
	for _, e := range barrier(t, w, dir) {
		if e.Kind == EventSnapshot && strings.HasSuffix(e.Path, ".csv") {
			t.Errorf("a CSV reported as a snapshot: %+v", e)
		}
	}
}
