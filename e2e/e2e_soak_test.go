//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	soakFor    = flag.Duration("soak-for", 10*time.Minute, "BenchmarkSoak: how long attach (or demo) runs")
	soakRate   = flag.Float64("soak-rate", 1000, "BenchmarkSoak: the sim's (or demo's) training steps per second (its --rate)")
	soakRetain = flag.String("soak-retain", "", "BenchmarkSoak: attach's --retain (empty: its default)")
	soakCmd    = flag.String("soak-cmd", "attach", "BenchmarkSoak: attach (sim → attach --headless) or demo (demo --headless)")
)

// BenchmarkSoak is the long live run a session left open on a busy job
// makes: `npumon sim` at -soak-rate steps/s serving `npumon attach
// --headless` over a Unix socket for -soak-for (or, with -soak-cmd demo,
// `npumon demo --headless` alone). It samples the resident set of attach
// (demo) every 5 s from /proc and reports it at a tenth, a fifth, half and
// the end of the run (1, 2, 5 and 10 minutes of a 10-minute run), with the
// entries received, held in detail and thinned by the retention window.
// The retention window keeps RSS flat: the end should be within 1.2× of
// the fifth. Not for CI (it runs for minutes):
//
//	go test -tags e2e -run '^$' -bench Soak -benchtime 1x -timeout 30m ./e2e/ -soak-for 10m
func BenchmarkSoak(b *testing.B) {
	bin := npumonBin(b)
	for b.Loop() {
		runSoak(b, bin)
	}
}

func runSoak(b *testing.B, bin string) {
	d := *soakFor
	rate := strconv.FormatFloat(*soakRate, 'g', -1, 64)
	var sim *exec.Cmd
	var args []string
	if *soakCmd == "demo" {
		args = []string{"demo", "--headless", d.String(), "--rate", rate}
	} else {
		sock := filepath.Join(b.TempDir(), "soak.sock")
		sim = exec.Command(bin, "sim", "--rate", rate, "--listen", "unix:"+sock)
		var simOut bytes.Buffer
		sim.Stdout = &simOut
		if err := sim.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() {
			if sim.ProcessState == nil {
				sim.Process.Kill()
				sim.Wait()
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, err := os.Stat(sock); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("sim did not listen on %s: %s", sock, simOut.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		args = []string{"attach", "unix:" + sock, "--headless", d.String()}
		if *soakRetain != "" {
			args = append(args, "--retain", *soakRetain)
		}
	}
	cmd := exec.Command(bin, args...)
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	type sample struct {
		at  time.Duration
		rss int64
	}
	var samples []sample
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				b.Fatalf("%s: %v\n%s", args[0], err, stderr.String())
			}
			break wait
		case <-tick.C:
			if rss, ok := rssOf(cmd.Process.Pid); ok {
				samples = append(samples, sample{time.Since(start), rss})
				b.Logf("%6.0f s  RSS %6.1f MB", time.Since(start).Seconds(), float64(rss)/1e6)
			}
		}
	}
	if sim != nil {
		sim.Process.Signal(os.Interrupt)
		sim.Wait()
	}
	var sum struct {
		Received uint64 `json:"received_entries"`
		Missed   uint64 `json:"missed_entries"`
		Entries  int64  `json:"entries"`
		Thinned  int64  `json:"thinned_entries"`
		Retain   string `json:"retain"`
		Peak     int64  `json:"peak_active_bytes"`
	}
	if err := json.Unmarshal([]byte(out.String()), &sum); err != nil {
		b.Fatalf("%s output %q: %v", args[0], out.String(), err)
	}
	at := func(f float64) float64 { // RSS (MB) at the sample nearest f of the run
		best := -1
		for i, s := range samples {
			if best < 0 || abs(s.at.Seconds()-f*d.Seconds()) < abs(samples[best].at.Seconds()-f*d.Seconds()) {
				best = i
			}
		}
		if best < 0 {
			return 0
		}
		return float64(samples[best].rss) / 1e6
	}
	r10, r20, r50, end := at(0.1), at(0.2), at(0.5), float64(samples[len(samples)-1].rss)/1e6
	b.ReportMetric(r10, "MB-RSS-tenth")
	b.ReportMetric(r20, "MB-RSS-fifth")
	b.ReportMetric(r50, "MB-RSS-half")
	b.ReportMetric(end, "MB-RSS-end")
	if r20 > 0 {
		b.ReportMetric(end/r20, "end/fifth")
	}
	b.ReportMetric(float64(sum.Entries), "entries")
	b.ReportMetric(float64(sum.Thinned), "thinned")
	b.ReportMetric(float64(sum.Entries-sum.Thinned), "held")
	b.ReportMetric(float64(sum.Received), "received")
	b.ReportMetric(float64(sum.Missed), "missed")
	b.Logf("%s for %v (retain %s): RSS %.1f / %.1f / %.1f / %.1f MB at %v / %v / %v / end; entries %d, thinned %d, held %d; received %d, missed %d",
		args[0], d, sum.Retain, r10, r20, r50, end, d/10, d/5, d/2, sum.Entries, sum.Thinned, sum.Entries-sum.Thinned, sum.Received, sum.Missed)
}

// rssOf reads a process's resident set (VmRSS) in bytes.
func rssOf(pid int) (int64, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
