package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/wire"
	"github.com/npumon/npumon/replay"
)

// The Python producer (monitor/producer/python/npumon_producer) against
// npumon's attach, with a stand-in torch / torch_npu whose _snapshot()
// replays recorded snapshots (tests/standin). No torch, no device.

const producerDir = "../../monitor/producer/python"

// pyProducer is a `python3 -m npumon_producer train_standin.py` process.
type pyProducer struct {
	cmd   *exec.Cmd
	pid   int
	lines chan map[string]any
	errb  *syncBuf
}

// startProducer runs the stand-in job with the producer; interval is the
// background poll interval, env extra environment (NPUMON_PRODUCER_*).
func startProducer(t *testing.T, interval string, env []string, args ...string) *pyProducer {
	t.Helper()
	abs, err := filepath.Abs(producerDir)
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"-m", "npumon_producer", "--interval", interval, filepath.Join(abs, "tests", "train_standin.py")}, args...)
	path := abs + string(os.PathListSeparator) + filepath.Join(abs, "tests", "standin")
	if slices.Contains(env, "NPUMON_PRODUCER=1") { // no -m: the environment starts it
		argv = append([]string{filepath.Join(abs, "tests", "train_standin.py")}, args...)
		path = filepath.Join(abs, "autostart") + string(os.PathListSeparator) + path
		env = append(env, "NPUMON_PRODUCER_INTERVAL="+interval)
	}
	cmd := exec.Command("python3", argv...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+path, "PYTHONDONTWRITEBYTECODE=1")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &pyProducer{cmd: cmd, lines: make(chan map[string]any, 16), errb: &syncBuf{}}
	cmd.Stderr = p.errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("python3: %v", err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.lines <- m
			}
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return p
}

// syncBuf collects the producer's stderr while the test may read it.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// await returns the next line that has key, failing on an "error" line.
func (p *pyProducer) await(t *testing.T, key string) map[string]any {
	t.Helper()
	timeout := time.After(time.Minute) // only bounds a hang
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				t.Fatalf("producer exited before %q; stderr:\n%s", key, p.errb.String())
			}
			if e, ok := m["error"]; ok {
				t.Fatalf("producer: %v; stderr:\n%s", e, p.errb.String())
			}
			if _, ok := m[key]; ok {
				return m
			}
		case <-timeout:
			t.Fatalf("no %q from the producer; stderr:\n%s", key, p.errb.String())
		}
	}
}

// wait waits for the process to exit 0.
func (p *pyProducer) wait(t *testing.T) {
	t.Helper()
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("producer: %v; stderr:\n%s", err, p.errb.String())
	}
}

// runtimeDir points npumon and the producers at a fresh, short socket directory.
func runtimeDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "npx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	t.Setenv("XDG_RUNTIME_DIR", d)
	return d
}

// attachAsync runs `npumon attach ARGS` in the background; the test does
// not end before it has.
func attachAsync(t *testing.T, args ...string) <-chan attachSummaryJSON {
	res := make(chan attachSummaryJSON, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		code, out, errOut := captureRun(t, append([]string{"attach"}, args...)...)
		var s attachSummaryJSON
		if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 {
			t.Errorf("attach: exit %d, %v: %s", code, err, errOut)
		}
		res <- s
	}()
	t.Cleanup(func() { <-finished })
	return res
}

// watchedAttach is a headless `npumon attach` whose client the test
// watches (attachWatch): it ends when what the test waits for has come,
// not after a guessed duration.
type watchedAttach struct {
	res    <-chan attachSummaryJSON
	client *wire.Client
	store  *store.Store
	end    func()
}

// startAttach runs `npumon attach ARGS --headless 60s`; the 60 s only bound
// a run whose awaited condition never comes (see until).
func startAttach(t *testing.T, args ...string) *watchedAttach {
	t.Helper()
	type started struct {
		c   *wire.Client
		st  *store.Store
		end func()
	}
	ch := make(chan started, 1)
	attachWatch = func(c *wire.Client, st *store.Store, end func()) { ch <- started{c, st, end} }
	a := &watchedAttach{res: attachAsync(t, append(args, "--headless", "60s")...)}
	select {
	case s := <-ch:
		a.client, a.store, a.end = s.c, s.st, s.end
	case s := <-a.res:
		attachWatch = nil
		t.Fatalf("attach ended before it started a client: %+v", s)
	}
	attachWatch = nil
	return a
}

// until waits for cond on the attach's client status and Store, then
// ends the attach and returns its summary.
func (a *watchedAttach) until(t *testing.T, what string, cond func(wire.ClientStatus, *store.Store) bool) attachSummaryJSON {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond(a.client.Status(), a.store) {
		select {
		case s := <-a.res:
			t.Fatalf("attach ran its whole --headless time without %s: %+v", what, s)
		case <-tick.C:
		}
	}
	a.end()
	return <-a.res
}

// attachUntil is startAttach(ARGS).until(what, cond).
func attachUntil(t *testing.T, what string, cond func(wire.ClientStatus, *store.Store) bool, args ...string) attachSummaryJSON {
	t.Helper()
	return startAttach(t, args...).until(t, what, cond)
}

// producerGone: the client's session with the producer pid is over (its
// BYE taken: every entry sent before it is in the Store).
func producerGone(pid int) func(wire.ClientStatus, *store.Store) bool {
	return func(st wire.ClientStatus, _ *store.Store) bool {
		return st.Hello != nil && st.Hello.PID == pid && st.State != wire.ConnConnected
	}
}

// sameState: the figures of the allocator state at the newest entry.
func sameState(t *testing.T, got attachSummaryJSON, want replaySummaryJSON) {
	t.Helper()
	g, w := got.replaySummaryJSON, want
	// the segment-map figures are pointers (null without a map): DeepEqual compares what they point to
	if !reflect.DeepEqual([]any{g.ActiveBytes, g.AllocatedBytes, g.RequestedBytes, g.ReservedBytes, g.Segments, g.Blocks,
		g.LiveBlocks, g.LargestFreeBlockBytes, g.InactiveBytes, g.FreeFragmentation, g.OOMs},
		[]any{w.ActiveBytes, w.AllocatedBytes, w.RequestedBytes, w.ReservedBytes, w.Segments, w.Blocks,
			w.LiveBlocks, w.LargestFreeBlockBytes, w.InactiveBytes, w.FreeFragmentation, w.OOMs}) {
		t.Fatalf("attach ends with\n%+v\nreplay of the last snapshot gives\n%+v", g, w)
	}
}

// TestProducerAttachMatchesReplay: the producer starts first (npumon
// attaches by pid, on the default socket), the job's trace happens in
// steps, and `npumon attach --headless` ends with exactly the figures
// `npumon replay --headless` gives for the last snapshot _snapshot()
// returned. torch_npu files have no time_us: the producer stamps entries
// with its poll time (time_resolution_us), and its log lacks the
// workspace triples torch_npu prepends (they are in its first snapshot).
func TestProducerAttachMatchesReplay(t *testing.T) {
	for _, tc := range []struct {
		name, path  string
		cuda, timed bool
		extra       []string
		env         []string
	}{
		{"cuda-2026", fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), true, true, nil, nil},
		// entries recorded inside each _snapshot() call, between its trace and its segments
		{"cuda-2026-race", fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), true, true, []string{"--race", "3"}, nil},
		// started by the environment (autostart/sitecustomize.py), not by -m
		{"cuda-2.0-flexgen-env", fixture.Path(t, "snapshots/cuda-2.0-flexgen-1.3b_snapshot.pickle"), true, false, nil, []string{"NPUMON_PRODUCER=1"}},
		{"npu-workspace", needFixture(t, "../../replay/testdata/npu_workspace.pickle"), false, false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtimeDir(t)
			dump := filepath.Join(t.TempDir(), "last.pickle")
			args := append([]string{"--fixture", tc.path, "--clients", "1", "--manual", "--dump", dump}, tc.extra...)
			if tc.cuda {
				args = append(args, "--cuda")
			}
			// background polls every hour: the two at start, then one per step
			begin := time.Now().UnixMicro()
			p := startProducer(t, "1h", tc.env, args...)
			p.await(t, "ready")
			got := attachUntil(t, "the job's goodbye", producerGone(p.pid), strconv.Itoa(p.pid))
			done := p.await(t, "done")
			p.wait(t)
			want := headlessSummary(t, "--headless", "10ms", dump)
			if got.ProducerPID != p.pid || got.MissedEntries != 0 || got.Gaps != 0 || got.Received == 0 {
				t.Fatalf("connection %+v", got)
			}
			// Entries recorded before the producer's first snapshot entry are
			// in its first state, not in its log.
			pre := entriesBeforeFirstSnapshot(t, dump)
			if tc.timed {
				g := got.replaySummaryJSON
				g.Source = want.Source
				g.PeakScope = want.PeakScope                             // attach: since attach (or the process); replay: the capture
				g.Retain, g.ThinnedEntries, g.DetailFrom = nil, nil, nil // live only (nothing thinned here)
				if pre > 0 {
					g.Entries, g.Applied, g.FirstTime = g.Entries+pre, g.Applied+pre, want.FirstTime
				}
				if !reflect.DeepEqual(g, want) || got.TimeResolutionUS != 0 {
					t.Fatalf("attach ends with\n%+v\nreplay of the last snapshot gives\n%+v", g, want)
				}
				return
			}
			sameState(t, got, want)
			ws := 0
			for _, n := range done["workspace"].([]any) {
				ws += int(n.(float64))
			}
			if pre != int64(ws) {
				t.Fatalf("%d entries before the first snapshot entry, %d workspace entries", pre, ws)
			}
			if got.Entries+int64(ws) != want.Entries || got.Applied+int64(ws) != want.Applied ||
				got.PeakActiveBytes != want.PeakActiveBytes || got.PeakReservedBytes != want.PeakReservedBytes {
				t.Fatalf("attach %+v\nreplay %+v (workspace entries %d)", got, want, ws)
			}
			if got.TimeResolutionUS != 3600e6 || got.TimeBase != "epoch_us" || got.FirstTime < begin || got.LastTime > time.Now().UnixMicro() {
				t.Fatalf("times: %+v (run began at %d)", got, begin)
			}
		})
	}
}

// entriesBeforeFirstSnapshot counts device 0's trace entries before its
// first `snapshot` entry in a snapshot file.
func entriesBeforeFirstSnapshot(t *testing.T, path string) int64 {
	t.Helper()
	c, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range c.Snapshot.DeviceTraces[0] {
		if e.Action == snapshot.ActionSnapshot {
			return int64(i)
		}
	}
	t.Fatalf("%s: no snapshot entry", path)
	return 0
}

// TestProducerRingOverflow: the ring buffer holds 300 entries and each
// step records about 650: every poll finds its predecessor's entries gone.
// The producer sends a GAP of unknown size and a fresh SNAPSHOT; the
// client ends in the allocator's exact state.
func TestProducerRingOverflow(t *testing.T) {
	runtimeDir(t)
	dump := filepath.Join(t.TempDir(), "last.pickle")
	p := startProducer(t, "1h", []string{"NPUMON_PRODUCER_MAX_ENTRIES=300"}, "--fixture",
		fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), "--cuda", "--clients", "1", "--manual", "--dump", dump)
	p.await(t, "ready")
	got := attachUntil(t, "the job's goodbye", producerGone(p.pid), strconv.Itoa(p.pid))
	done := p.await(t, "done")
	p.wait(t)
	want := headlessSummary(t, "--headless", "10ms", dump)
	sameState(t, got, want)
	overflows := done["stats"].(map[string]any)["overflows"].(float64)
	if overflows < 5 || got.Gaps != int(overflows) || got.Resyncs != int(overflows) || want.Entries != 300 {
		t.Fatalf("overflows %v, attach %+v, replay entries %d", overflows, got, want.Entries)
	}
}

// TestProducerSlowConsumer: one client connects and reads nothing while
// the job runs; another attaches normally. The stalled one never slows the
// job or the other client down; when it reads again it finds a GAP, a
// fresh SNAPSHOT and the rest, and ends in the same state.
func TestProducerSlowConsumer(t *testing.T) {
	dir := runtimeDir(t)
	dump := filepath.Join(t.TempDir(), "last.pickle")
	release := filepath.Join(dir, "release")
	fix := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	// budget 1: polls every 20 ms, however long they take, so that the
	// stalled client's queue overflows; 50 ms between steps leave the attached
	// client (another process, maybe descheduled on a busy host) time to drain
	p := startProducer(t, "20ms", []string{"NPUMON_PRODUCER_QUEUE=2000", "NPUMON_PRODUCER_SNDBUF=4096", "NPUMON_PRODUCER_BUDGET=1"},
		"--fixture", fix, "--cuda", "--clients", "2", "--steps", "20", "--step-sleep", "0.05", "--hold-file", release, "--dump", dump)
	p.await(t, "ready")
	sock := filepath.Join(dir, "npumon", strconv.Itoa(p.pid)+".sock")
	stalled, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	attached := startAttach(t, strconv.Itoa(p.pid))
	p.await(t, "holding") // the whole trace has happened; the stalled client read nothing
	read := make(chan []byte, 1)
	go func() {
		data, _ := io.ReadAll(stalled)
		read <- data
	}()
	os.WriteFile(release, nil, 0o600)
	p.await(t, "done")
	p.wait(t)
	got := attached.until(t, "the job's goodbye", producerGone(p.pid))
	want := headlessSummary(t, "--headless", "10ms", dump)
	sameState(t, got, want)
	if got.Gaps != 0 || got.PeakActiveBytes != want.PeakActiveBytes {
		t.Fatalf("the attached client fell behind: %+v", got)
	}
	// what the stalled client was sent, fed to a client
	data := <-read
	st, status := replayStream(t, data)
	if status.Missed == 0 || status.Resyncs == 0 {
		t.Fatalf("the stalled client got no gap and resync: %+v (%d bytes)", status, len(data))
	}
	sum := st.Summary(0, 1<<62)
	if sum.ActiveBytes != want.ActiveBytes || sum.ReservedBytes != want.ReservedBytes || sum.Segments != *want.Segments ||
		sum.TotalFreeBytes != *want.InactiveBytes || sum.Blocks != *want.Blocks {
		t.Fatalf("stalled client ends with %+v, want %+v", sum, want)
	}
}

// replayStream serves recorded producer bytes to a wire.Client.
func replayStream(t *testing.T, data []byte) (*store.Store, wire.ClientStatus) {
	t.Helper()
	path := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "replay.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write(data)
			c.Close()
		}
	}()
	st := store.New(store.Options{})
	cl := wire.NewClient("unix", path, st, wire.ClientOptions{NoReconnect: true})
	err = cl.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "goodbye") {
		t.Fatalf("stream ended with %v", err)
	}
	return st, cl.Status()
}

// TestProducerKilledAndRestarted: a job killed with SIGKILL leaves its
// socket file behind; attach says disconnected and keeps what it saw; a
// new job on the same address replaces the stale socket and attach picks
// it up. A third job finding a live producer there does not start one, and
// its training goes on.
func TestProducerKilledAndRestarted(t *testing.T) {
	dir := runtimeDir(t)
	sock := filepath.Join(dir, "job.sock")
	env := []string{"NPUMON_PRODUCER_ADDR=unix:" + sock}
	npu := needFixture(t, "../../replay/testdata/npu_workspace.pickle")
	cuda := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")

	a := startProducer(t, "20ms", env, "--fixture", cuda, "--cuda", "--clients", "1", "--steps", "4", "--manual", "--hold", "30")
	a.await(t, "ready")
	// attach outlives a kill, a restart and its reconnect backoff: it
	// ends when the restarted job has said goodbye
	attached := startAttach(t, "unix:"+sock)
	a.await(t, "holding")
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("a killed producer leaves its socket: %v", err)
	}

	dump := filepath.Join(t.TempDir(), "last.pickle")
	release := filepath.Join(dir, "release")
	b := startProducer(t, "20ms", env, "--fixture", npu, "--clients", "1", "--hold-file", release, "--dump", dump)
	b.await(t, "ready")
	b.await(t, "clients") // attach reconnected
	c := startProducer(t, "20ms", env, "--fixture", npu)
	refused := c.await(t, "refused")
	c.wait(t)
	if !strings.Contains(c.errb.String(), "another producer is serving") || refused["refused"] == nil {
		t.Fatalf("third producer: %v, stderr %q", refused, c.errb.String())
	}
	os.WriteFile(release, nil, 0o600)
	b.await(t, "done")
	b.wait(t)
	got := attached.until(t, "the restarted job's goodbye", producerGone(b.pid))
	// the state is the restarted job's; the log also keeps the killed
	// job's entries (and its peak)
	want := headlessSummary(t, "--headless", "10ms", dump)
	sameState(t, got, want)
	if got.ProducerPID != b.pid || got.Entries <= want.Entries || got.PeakActiveBytes <= want.PeakActiveBytes {
		t.Fatalf("attach %+v; replay of the restarted job %+v", got, want)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("a producer that stops cleanly removes its socket: %v", err)
	}
}

// TestProducerPython runs the package's own unit tests (alignment of
// consecutive traces, ring wrap, encoders against the documented bytes,
// never raising into the job, the socket rules of monitor/wire's
// testdata/socket_rules.json, an offline install into a venv); `make
// test-python` runs them without Go.
func TestProducerPython(t *testing.T) {
	abs, _ := filepath.Abs(producerDir)
	cmd := exec.Command("python3", "-m", "unittest", "discover", "-s", filepath.Join(abs, "tests"), "-p", "test_*.py")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+abs+string(os.PathListSeparator)+filepath.Join(abs, "tests", "standin"),
		"PYTHONDONTWRITEBYTECODE=1")
	cmd.Dir = abs
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unit tests: %v\n%s", err, out)
	}
}
