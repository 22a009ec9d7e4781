//go:build e2e

package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/wiretest"
	"github.com/npumon/npumon/monitor/wire"
)

var (
	liveRate = flag.Int("live-rate", 1_000_000, "BenchmarkLiveAttach: entries per second to publish")
	liveFor  = flag.Duration("live-for", 10*time.Second, "BenchmarkLiveAttach: how long to publish")
	liveTUI  = flag.Bool("live-tui", false, "BenchmarkLiveAttach: run attach with its terminal UI drawing in tmux (120×40) instead of --headless")
	liveSpin = flag.Int("live-spin", 0, "BenchmarkLiveAttach: processes that spin on the CPU while it runs (1 loads the second core of a 2-core host)")
)

// BenchmarkLiveAttach measures the live path as a user runs it: the real
// `npumon attach --headless` (the app's data path: Store, polling and the
// cursor queries of a 120×40 screen, nothing drawn) in its own process,
// fed over a Unix socket by a producer publishing -live-rate entries/s for
// -live-for through wire.Server with the server's defaults, as
// `npumon sim` has them (queue, socket buffer). The producer replays a consistent pattern (one segment,
// alloc / free_requested / free_completed of 256 slots) at wall-clock
// times. Reported: the rate reached, the entries attach received and
// missed, and attach's CPU time per entry (rusage of the child).
//
// With -live-tui attach runs as a user sees it: the terminal UI drawing in
// a 120×40 tmux pane. The counts then come from its --metrics endpoint
// (npumon_trace_entries_received_total / _missed_total), read once the
// producer is done and attach has caught up, and its CPU time and peak RSS
// from /proc before it is told to quit.
//
// With -live-spin N, N processes (sh busy loops) spin on the CPU from
// before attach starts until the run ends: on a 2-core host -live-spin 1
// is a job holding the other core, so the producer and attach share one.
//
//	go test -tags e2e -run '^$' -bench LiveAttach -benchtime 1x ./e2e/ -live-rate 1000000 -live-for 60s [-live-tui] [-live-spin 1]
func BenchmarkLiveAttach(b *testing.B) {
	bin := npumonBin(b)
	for b.Loop() {
		runLiveAttach(b, bin, *liveRate, *liveFor)
	}
}

// liveAttach is the attach under measurement, headless or in tmux.
type liveAttach interface {
	// finish waits for attach to end its run (headless) or to catch up
	// with want entries (received + missed; TUI), then stops it and reads
	// its figures.
	finish(b *testing.B, want uint64) liveResult
}

type liveResult struct {
	received, missed uint64
	cpu              time.Duration
	maxRSS           int64 // bytes
}

func runLiveAttach(b *testing.B, bin string, rate int, d time.Duration) {
	sock := filepath.Join(b.TempDir(), "live.sock")
	srv, err := wire.Listen("unix", sock, wire.ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	spinLoad(b, *liveSpin)
	// --max-entries: room for the whole run (the default bounds a session to 4 Mi entries).
	limit := int(float64(rate)*d.Seconds()*1.1) + 1<<20
	var att liveAttach
	if *liveTUI {
		att = startLiveTUI(b, bin, sock, limit)
	} else {
		att = startLiveHeadless(b, bin, sock, limit, d)
	}
	for srv.Stats().Clients == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	// the producer's backlog for attach, sampled: how close its queue came
	// to dropping (QueueBytes)
	peakBacklog := 0
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				peakBacklog = max(peakBacklog, srv.Stats().Backlog)
			}
		}
	}()
	var self0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	batch := make([]snapshot.TraceEntry, 1024)
	live := wiretest.NewLive()
	srv.Publish(0, []snapshot.TraceEntry{live.Segment(time.Now().UnixMicro())})
	start := time.Now()
	sent := 0
	for time.Since(start) < d {
		due := int(time.Since(start).Seconds() * float64(rate))
		if sent >= due {
			time.Sleep(200 * time.Microsecond)
			continue
		}
		now := time.Now().UnixMicro()
		n := min(len(batch), due-sent)
		for i := range batch[:n] {
			batch[i] = live.Next(now)
		}
		srv.Publish(0, batch[:n])
		sent += n
	}
	elapsed := time.Since(start)
	var self1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	prodCPU := time.Duration(self1.Utime.Nano() + self1.Stime.Nano() - self0.Utime.Nano() - self0.Stime.Nano())
	r := att.finish(b, uint64(sent+1))
	close(stopSampling)
	<-sampled
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "published/s")
	b.ReportMetric(float64(r.received), "received")
	b.ReportMetric(float64(r.missed), "missed")
	b.ReportMetric(float64(r.cpu.Nanoseconds())/float64(max(r.received, 1)), "attach-cpu-ns/entry")
	b.ReportMetric(float64(r.maxRSS)/float64(max(r.received, 1)), "attach-maxrss-B/entry")
	b.ReportMetric(float64(peakBacklog)/(1<<20), "producer-backlog-peak-MiB")
	mode := "headless"
	if *liveTUI {
		mode = "TUI"
	}
	if *liveSpin > 0 {
		mode += fmt.Sprintf(", %d spinning", *liveSpin)
	}
	// every entry published is received or reported missed: the rest
	// went unaccounted
	unaccounted := int64(sent+1) - int64(r.received+r.missed)
	fmt.Printf("live (%s): published %d in %v (%.0f/s), attach received %d, missed %d, unaccounted %d, server dropped %d, attach CPU %v (%.0f ns/entry, %.0f%% of a core), maxrss %d MB; producer CPU %v, producer backlog peak %.1f MiB\n",
		mode, sent+1, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), r.received, r.missed, unaccounted, srv.Stats().Dropped,
		r.cpu.Round(time.Millisecond), float64(r.cpu.Nanoseconds())/float64(max(r.received, 1)), 100*r.cpu.Seconds()/elapsed.Seconds(),
		r.maxRSS>>20, prodCPU.Round(time.Millisecond), float64(peakBacklog)/(1<<20))
	if unaccounted != 0 {
		b.Errorf("%d entries published were neither received nor reported missed", unaccounted)
	}
}

// spinLoad starts n processes that spin on the CPU until the benchmark
// ends (each is killed by its own pid at cleanup).
func spinLoad(b *testing.B, n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
}

// liveHeadless is `npumon attach --headless`, a child of the test.
type liveHeadless struct {
	cmd         *exec.Cmd
	out, stderr strings.Builder
}

func startLiveHeadless(b *testing.B, bin, sock string, limit int, d time.Duration) *liveHeadless {
	// attach counts --headless from its first data: give it the whole run
	// plus a margin to drain, then it prints the summary.
	h := &liveHeadless{cmd: exec.Command(bin, "attach", "unix:"+sock, "--headless", (d + 3*time.Second).String(),
		"--max-entries", fmt.Sprint(limit))}
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.stderr
	if err := h.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return h
}

func (h *liveHeadless) finish(b *testing.B, _ uint64) liveResult {
	if err := h.cmd.Wait(); err != nil {
		b.Fatalf("attach: %v\n%s", err, h.stderr.String())
	}
	var sum struct {
		Received uint64 `json:"received_entries"`
		Missed   uint64 `json:"missed_entries"`
	}
	if err := json.Unmarshal([]byte(h.out.String()), &sum); err != nil {
		b.Fatalf("attach output %q: %v", h.out.String(), err)
	}
	ru := h.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return liveResult{received: sum.Received, missed: sum.Missed,
		cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), maxRSS: ru.Maxrss * 1024}
}

// liveTUIAttach is `npumon attach` drawing in a tmux pane of its own
// server, with --metrics on a loopback port.
type liveTUIAttach struct {
	tmux    string // the tmux server's socket name (-L)
	metrics string
	pid     int
}

func startLiveTUI(b *testing.B, bin, sock string, limit int) *liveTUIAttach {
	fixture.Tool(b, "tmux", "tmux")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t := &liveTUIAttach{tmux: fmt.Sprintf("npumon-live-%d-%d", os.Getpid(), time.Now().UnixNano()), metrics: addr}
	// exec: the pane's process is attach itself
	shell := fmt.Sprintf("exec env TERM=xterm-256color %s attach unix:%s --max-entries %d --metrics %s 2>/dev/null", bin, sock, limit, addr)
	cmd := exec.Command("tmux", "-L", t.tmux, "-f", "/dev/null", "new-session", "-d", "-s", "live", "-x", "120", "-y", "40", shell)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	b.Cleanup(func() { exec.Command("tmux", "-L", t.tmux, "kill-server").Run() })
	out, err := exec.Command("tmux", "-L", t.tmux, "display-message", "-p", "-t", "live", "#{pane_pid}").Output()
	if err != nil {
		b.Fatalf("tmux display-message: %v", err)
	}
	if t.pid, err = strconv.Atoi(strings.TrimSpace(string(out))); err != nil {
		b.Fatalf("pane pid %q: %v", out, err)
	}
	return t
}

// counts reads received and missed entries from attach's metrics.
func (t *liveTUIAttach) counts() (received, missed uint64, err error) {
	resp, err := http.Get("http://" + t.metrics + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(body), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case strings.HasPrefix(f[0], "npumon_trace_entries_received_total"):
			received += uint64(v)
		case strings.HasPrefix(f[0], "npumon_trace_entries_missed_total"):
			missed += uint64(v)
		}
	}
	return received, missed, nil
}

func (t *liveTUIAttach) finish(b *testing.B, want uint64) liveResult {
	// caught up: everything published was received or reported missed,
	// or nothing changed for 3 s
	var r, m uint64
	last, since := uint64(0), time.Now()
	for {
		var err error
		r, m, err = t.counts()
		if err != nil {
			b.Fatalf("attach metrics: %v", err)
		}
		if r+m >= want || time.Since(since) > 3*time.Second {
			break
		}
		if r+m != last {
			last, since = r+m, time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", t.pid))
	if err != nil {
		b.Fatal(err)
	}
	// fields after the command's closing parenthesis: utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 per second here)
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	res := liveResult{received: r, missed: m, cpu: time.Duration(ut+st) * 10 * time.Millisecond}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", t.pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			res.maxRSS = kb << 10
		}
	}
	screen, _ := exec.Command("tmux", "-L", t.tmux, "capture-pane", "-p", "-t", "live").Output()
	if !strings.Contains(string(screen), "live.sock") {
		b.Fatalf("attach's screen does not show the source:\n%s", screen)
	}
	exec.Command("tmux", "-L", t.tmux, "send-keys", "-t", "live", "q").Run()
	for i := 0; i < 100 && syscall.Kill(t.pid, 0) == nil; i++ {
		time.Sleep(50 * time.Millisecond)
	}
	return res
}
