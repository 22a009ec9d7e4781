package main

import (
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/metrics"
	"github.com/npumon/npumon/monitor/store"
)

// TestSoakProducerUnderStorm is the soak and fault test (bounded: about
// 10 s): the Python producer serves a stand-in job while 200 idle clients
// and a reconnect storm hammer its socket and 1,100 idle connections hold
// a /metrics server in this process, and a real `npumon watch` follows a
// churning directory (soak_watch_test.go). Checked: the client that keeps up
// ends in the job's exact state with nothing lost; the producer held at
// most its cap and refused the rest; its state was encoded at most once a
// poll; the job's own step time stayed within a generous bound of a run
// without the storm; scrapes kept succeeding; the watch ended on the
// newest complete snapshot with its RSS under soakWatchRSSBound.
func TestSoakProducerUnderStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test")
	}
	fix := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	run := func(storm bool) (attachSummaryJSON, replaySummaryJSON, map[string]any) {
		dir := runtimeDir(t)
		dump := filepath.Join(t.TempDir(), "last.pickle")
		p := startProducer(t, "20ms", nil, "--fixture", fix, "--cuda", "--clients", "1", "--steps", "100",
			"--step-sleep", "0.02", "--dump", dump)
		p.await(t, "ready")
		sock := filepath.Join(dir, "npumon", strconv.Itoa(p.pid)+".sock")
		// the client that keeps up joins first: the job steps once it is served
		attached := startAttach(t, strconv.Itoa(p.pid))
		p.await(t, "clients")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if storm {
			var idle []net.Conn
			for range 200 {
				if c, err := net.DialTimeout("unix", sock, 50*time.Millisecond); err == nil {
					idle = append(idle, c)
				}
			}
			defer func() {
				for _, c := range idle {
					c.Close()
				}
			}()
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-stop:
							return
						default:
						}
						if c, err := net.DialTimeout("unix", sock, 50*time.Millisecond); err == nil {
							time.Sleep(5 * time.Millisecond)
							c.Close()
						}
					}
				}()
			}
		}
		done := p.await(t, "done")
		close(stop)
		wg.Wait()
		p.wait(t)
		got := attached.until(t, "the job's goodbye", producerGone(p.pid))
		return got, headlessSummary(t, "--headless", "10ms", dump), done
	}

	// /metrics flooded all along
	st := store.New(store.Options{})
	ms, err := metrics.Serve("127.0.0.1:0", metrics.New(metrics.Target{Store: st, Rank: -1, PID: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 1100 {
		c, err := net.Dial("tcp", ms.Addr().String())
		if err != nil {
			t.Fatalf("/metrics flood: %v", err)
		}
		flood = append(flood, c)
	}
	var scrapes, failed atomic.Int64
	scrapeStop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for {
			select {
			case <-scrapeStop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			resp, err := cl.Get("http://" + ms.Addr().String() + "/metrics")
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
			} else {
				scrapes.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()

	_, _, quiet := run(false)
	// a watched directory churning all through the storm
	watched := startChurnedWatch(t)
	churned := make(chan struct{})
	go func() { defer close(churned); watched.churn(t, 100) }()
	got, want, done := run(true)
	close(scrapeStop)
	<-scraped
	<-churned
	watched.check(t)

	sameState(t, got, want)
	if got.Gaps != 0 || got.MissedEntries != 0 || got.PeakActiveBytes != want.PeakActiveBytes {
		t.Fatalf("the client that kept up lost entries under the storm: %+v", got)
	}
	stats := done["stats"].(map[string]any)
	if stats["refused"].(float64) == 0 {
		t.Fatalf("nothing refused over the client cap: %v", stats)
	}
	if e, n := stats["state_encodes"].(float64), stats["polls"].(float64); e > n+1 {
		t.Fatalf("%v state encodes in %v polls", e, n)
	}
	q, s := quiet["step_work_s"].(float64), done["step_work_s"].(float64)
	t.Logf("job's step work %.0f ms quiet, %.0f ms under the storm; producer %v; %d scrapes, %d failed",
		q*1e3, s*1e3, stats, scrapes.Load(), failed.Load())
	if s > 3*q+0.2 { // generous: the machine is shared
		t.Fatalf("the storm slowed the job's steps from %.0f to %.0f ms", q*1e3, s*1e3)
	}
	if failed.Load() > 0 || scrapes.Load() == 0 {
		t.Fatalf("scrapes under the /metrics flood: %d ok, %d failed", scrapes.Load(), failed.Load())
	}
}
