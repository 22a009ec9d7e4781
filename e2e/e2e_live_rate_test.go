//go:build e2e

package e2e

import (
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/wire"
)

var (
	liveRate    = flag.Int("live-rate", 1_000_000, "BenchmarkLiveAttach: entries per second to publish")
	liveSeconds = flag.Duration("live-for", 10*time.Second, "BenchmarkLiveAttach: how long to publish")
)

// BenchmarkLiveAttach measures the live path as a user runs it: the real
// `npumon attach --headless` (the app's data path: Store, polling and the
// cursor queries of a 120×40 screen, nothing drawn) in its own process,
// fed over a Unix socket by a producer publishing -live-rate entries/s for
// -live-for through wire.Server with the queue a `npumon sim` has
// (65,536 entries). The producer replays a consistent pattern (one segment,
// alloc / free_requested / free_completed of 256 slots) at wall-clock
// times. Reported: the rate reached, the entries attach received and
// missed, and attach's CPU time per entry (rusage of the child).
//
//	go test -tags e2e -run '^$' -bench LiveAttach -benchtime 1x ./e2e/ -live-rate 1000000 -live-for 60s
func BenchmarkLiveAttach(b *testing.B) {
	bin := npumonBin(b)
	for b.Loop() {
		runLiveAttach(b, bin, *liveRate, *liveSeconds)
	}
}

func runLiveAttach(b *testing.B, bin string, rate int, d time.Duration) {
	sock := filepath.Join(b.TempDir(), "live.sock")
	srv, err := wire.Listen("unix", sock, wire.ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	// attach counts --headless from its first data: give it the whole run
	// plus a margin to drain, then it prints the summary.
	// --max-entries: room for the whole run (the default bounds a session to 4 Mi entries).
	limit := int(float64(rate)*d.Seconds()*1.1) + 1<<20
	cmd := exec.Command(bin, "attach", "unix:"+sock, "--headless", (d + 3*time.Second).String(),
		"--max-entries", fmt.Sprint(limit))
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for srv.Stats().Clients == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	var self0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	const seg = uint64(0x7f0000000000)
	const slots = 256
	batch := make([]snapshot.TraceEntry, 1024)
	state := make([]uint8, slots) // 0 free, 1 allocated, 2 free requested
	var k uint32 = 1
	srv.Publish(0, []snapshot.TraceEntry{{Action: snapshot.ActionSegmentAlloc, Addr: seg, Size: slots << 20, TimeUS: time.Now().UnixMicro()}})
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
			k = k*1664525 + 1013904223 // an LCG picks the slot
			s := int(k>>8) % slots
			e := snapshot.TraceEntry{Addr: seg + uint64(s)<<20, Size: 512 << 10, Stream: 1, TimeUS: now, Frames: snapshot.StackID(1 + s%7)}
			switch state[s] {
			case 0:
				e.Action, state[s] = snapshot.ActionAlloc, 1
			case 1:
				e.Action, state[s] = snapshot.ActionFreeRequested, 2
			default:
				e.Action, state[s] = snapshot.ActionFreeCompleted, 0
			}
			batch[i] = e
		}
		srv.Publish(0, batch[:n])
		sent += n
	}
	elapsed := time.Since(start)
	var self1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	prodCPU := time.Duration(self1.Utime.Nano() + self1.Stime.Nano() - self0.Utime.Nano() - self0.Stime.Nano())
	if err := cmd.Wait(); err != nil {
		b.Fatalf("attach: %v\n%s", err, stderr.String())
	}
	var sum struct {
		Received uint64 `json:"received_entries"`
		Missed   uint64 `json:"missed_entries"`
		Entries  int64  `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out.String()), &sum); err != nil {
		b.Fatalf("attach output %q: %v", out.String(), err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "published/s")
	b.ReportMetric(float64(sum.Received), "received")
	b.ReportMetric(float64(sum.Missed), "missed")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(sum.Received, 1)), "attach-cpu-ns/entry")
	b.ReportMetric(float64(ru.Maxrss)*1024/float64(max(sum.Received, 1)), "attach-maxrss-B/entry")
	fmt.Printf("live: published %d in %v (%.0f/s), attach received %d, missed %d, server dropped %d, attach CPU %v (%.0f ns/entry), maxrss %d MB; producer CPU %v\n",
		sent+1, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), sum.Received, sum.Missed, srv.Stats().Dropped,
		cpu.Round(time.Millisecond), float64(cpu.Nanoseconds())/float64(max(sum.Received, 1)), ru.Maxrss>>10, prodCPU.Round(time.Millisecond))
}
