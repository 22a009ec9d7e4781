package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// soakWatchRSSBound is the documented bound on the watching npumon's
// resident memory over the soak (BENCHMARKS.md "Safety limits"): the
// snapshots it opens are 72–110 KB, so anything near it is a leak.
const soakWatchRSSBound = 128 << 20

// TestSoakWatchChild is not a test: it is the child process of
// startChurnedWatch, a real `npumon watch` whose RSS the parent reads.
func TestSoakWatchChild(t *testing.T) {
	args := os.Getenv("NPUMON_SOAK_WATCH_ARGS")
	if args == "" {
		t.Skip("the child process of TestSoakProducerUnderStorm")
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	os.Exit(run(argv))
}

// churnedWatch is a `npumon watch DIR` child process over a directory
// into which complete snapshots are renamed, and partial files, garbage,
// truncations and deletions thrown, all at once; rss samples its VmRSS.
type churnedWatch struct {
	dir       string
	cmd       *exec.Cmd
	out       bytes.Buffer
	errb      syncBuf
	stop      chan struct{}
	sampled   chan struct{}
	mu        sync.Mutex
	peakRSS   int64
	samples   int
	complete  []string // complete snapshots written, oldest first
	deleted   map[string]bool
	final     string
	garbageAt time.Time
}

// finalFixture is the last complete snapshot: its reserved bytes (unlike
// the churned ones') tell from the watch's /metrics that it is open.
const finalFixture = "snapshots/cuda-2.0-flexgen-1.3b_snapshot.pickle"

func startChurnedWatch(t *testing.T) *churnedWatch {
	t.Helper()
	w := &churnedWatch{dir: t.TempDir(), stop: make(chan struct{}), sampled: make(chan struct{}), deleted: map[string]bool{}}
	w.put(t, "snapshots/cuda-silmont-mem_snapshot.pickle", "first.pickle")
	argv, _ := json.Marshal([]string{"watch", w.dir, "--headless", "60s", "--metrics", "127.0.0.1:0"})
	w.cmd = exec.Command(os.Args[0], "-test.run=^TestSoakWatchChild$")
	w.cmd.Env = append(os.Environ(), "NPUMON_SOAK_WATCH_ARGS="+string(argv))
	w.cmd.Stdout, w.cmd.Stderr = &w.out, &w.errb
	if err := w.cmd.Start(); errors.Is(err, syscall.ENOEXEC) {
		t.Skip("the test binary cannot run itself here (it runs under an emulator: make test-arm64)")
	} else if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.cmd.Process.Kill() })
	go func() {
		defer close(w.sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			if rss, ok := vmRSS(w.cmd.Process.Pid); ok {
				w.mu.Lock()
				w.peakRSS, w.samples = max(w.peakRSS, rss), w.samples+1
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// vmRSS reads a process's resident set size from /proc.
func vmRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// put copies a fixture in as name completely: written aside, then renamed
// (Errorf, not Fatal: churn runs in its own goroutine).
func (w *churnedWatch) put(t *testing.T, fix, name string) {
	data, err := os.ReadFile(fixture.Path(t, fix))
	if err == nil {
		tmp := filepath.Join(w.dir, name+".tmp")
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, filepath.Join(w.dir, name))
		}
	}
	if err != nil {
		t.Errorf("churn: %v", err)
		return
	}
	w.complete = append(w.complete, name)
}

// churn runs rounds of writes, renames, truncations and deletions (bounded:
// rounds × a few ms), then a last garbage file and a last complete snapshot.
func (w *churnedWatch) churn(t *testing.T, rounds int) {
	fixes := []string{"snapshots/cuda-silmont-mem_snapshot.pickle", "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"}
	half, _ := os.ReadFile(fixture.Path(t, fixes[1]))
	half = half[:len(half)/2]
	rng := rand.New(rand.NewPCG(1, 2))
	junk := make([]byte, 4096)
	for j := range junk {
		junk[j] = byte(rng.Uint32())
	}
	// garbage left alone all along: the watcher gives up on a file that
	// stays broken after its GiveUp (3 s) and lists it as broken
	os.WriteFile(filepath.Join(w.dir, "zz_garbage.pickle"), junk, 0o600)
	w.mu.Lock()
	w.garbageAt = time.Now()
	w.mu.Unlock()
	for i := range rounds {
		w.put(t, fixes[i%2], fmt.Sprintf("snap_%03d.pickle", i))
		os.WriteFile(filepath.Join(w.dir, fmt.Sprintf("part_%03d.pickle", i)), half, 0o600)
		for j := range junk {
			junk[j] = byte(rng.Uint32())
		}
		os.WriteFile(filepath.Join(w.dir, fmt.Sprintf("junk_%03d.pkl", i)), junk, 0o600)
		if i >= 1 {
			os.Truncate(filepath.Join(w.dir, fmt.Sprintf("part_%03d.pickle", i-1)), 0)
		}
		if i >= 2 { // a complete one cut short under another name
			old := fmt.Sprintf("snap_%03d.pickle", i-2)
			cut := fmt.Sprintf("cut_%03d.pickle", i-2)
			os.Rename(filepath.Join(w.dir, old), filepath.Join(w.dir, cut))
			os.Truncate(filepath.Join(w.dir, cut), int64(len(half)/3))
			w.deleted[old] = true
		}
		if i >= 4 {
			os.Remove(filepath.Join(w.dir, fmt.Sprintf("cut_%03d.pickle", i-4)))
			os.Remove(filepath.Join(w.dir, fmt.Sprintf("junk_%03d.pkl", i-4)))
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
	}
	// the newest complete one it must end on, in a burst with an older one
	// (both settle in one tick, their mtimes alike)
	w.put(t, fixes[0], "snap_last.pickle")
	w.final = "zz_final.pickle"
	w.put(t, finalFixture, w.final)
}

// end waits (bounded) until the watch's /metrics show the last snapshot
// open, stops it (SIGTERM) and returns its summary and the peak RSS.
func (w *churnedWatch) end(t *testing.T) (watchSummaryJSON, int64, int) {
	t.Helper()
	want := float64(headlessSummary(t, "--headless", "10ms", fixture.Path(t, finalFixture)).ReservedBytes)
	cl := &http.Client{Timeout: 2 * time.Second}
	var addr string
	var seen float64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if addr == "" {
			if _, rest, ok := strings.Cut(w.errb.String(), "metrics on "); ok {
				addr, _, _ = strings.Cut(rest, "\n")
			}
			continue
		}
		resp, err := cl.Get(addr)
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		for line := range strings.Lines(string(body)) {
			if f := strings.Fields(line); len(f) == 2 && (f[0] == "npumon_reserved_bytes" || strings.HasPrefix(f[0], "npumon_reserved_bytes{")) {
				seen, _ = strconv.ParseFloat(f[1], 64)
			}
		}
		if seen == want {
			break
		}
	}
	if seen != want {
		t.Errorf("the watch's /metrics (%q) show %v reserved bytes, not the last snapshot's %v", addr, seen, want)
	}
	w.mu.Lock()
	garbageAt := w.garbageAt
	w.mu.Unlock()
	time.Sleep(time.Until(garbageAt.Add(5 * time.Second))) // GiveUp 3 s, generous
	w.cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- w.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("npumon watch: %v: %s", err, w.errb.String())
		}
	case <-time.After(15 * time.Second):
		w.cmd.Process.Kill()
		t.Fatalf("npumon watch did not end on SIGTERM: %s", w.errb.String())
	}
	close(w.stop)
	<-w.sampled
	var s watchSummaryJSON
	if err := json.Unmarshal(w.out.Bytes(), &s); err != nil {
		t.Fatalf("watch summary: %v: %q; stderr %s", err, w.out.String(), w.errb.String())
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return s, w.peakRSS, w.samples
}

// check: the watch kept up — it ends on the newest complete snapshot, no
// complete snapshot still there is listed as broken, the last garbage file
// is, and its RSS stayed under the bound.
func (w *churnedWatch) check(t *testing.T) {
	t.Helper()
	s, rss, samples := w.end(t)
	if filepath.Base(s.Open) != w.final || s.Entries == 0 {
		t.Errorf("watch ended on %q (%d entries), want the newest complete %s", s.Open, s.Entries, w.final)
	}
	var broken, listed int
	garbage := false
	for _, c := range s.Captures {
		name := filepath.Base(c.Path)
		listed++
		if c.Error != "" && c.Error != "removed" {
			broken++
		}
		complete := slices.Contains(w.complete, name) && !w.deleted[name]
		if complete && c.Error != "" {
			t.Errorf("complete snapshot %s listed as broken: %s", name, c.Error)
		}
		if name == "zz_garbage.pickle" {
			garbage = true
			if c.Error == "" {
				t.Errorf("the garbage file is not listed as broken: %+v", c)
			}
		}
	}
	if !garbage {
		t.Errorf("the last garbage file is not listed: %d captures", listed)
	}
	t.Logf("watch: %d captures listed, %d broken, open %s; peak RSS %.1f MiB over %d samples",
		listed, broken, filepath.Base(s.Open), float64(rss)/(1<<20), samples)
	if samples == 0 || rss > soakWatchRSSBound {
		t.Errorf("watch RSS peaked at %.1f MiB (%d samples), bound %d MiB", float64(rss)/(1<<20), samples, soakWatchRSSBound>>20)
	}
}
