package metrics

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/npumon/npumon/acl"
	"github.com/npumon/npumon/allocator"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/monitor/attach"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
)

// captureStore loads testdata/capture.pickle (written by gen_metrics.py,
// whose output lists the figures below).
func captureStore(t *testing.T) *store.Store {
	t.Helper()
	st := store.New(store.Options{})
	if _, err := watch.Load(context.Background(), "testdata/capture.pickle", st, watch.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	return st
}

// captureExposition is what one target holding capture.pickle exports,
// with the rank and pid labels given.
func captureExposition(rank, pid string) string {
	l := `{id="0",pid="` + pid + `",rank="` + rank + `"}`
	return strings.NewReplacer("L", l).Replace(`
npumon_active_bytes L 5.767168e+06
npumon_allocated_bytes L 2.62144e+06
npumon_requested_bytes L 2.62144e+06
npumon_reserved_bytes L 1.048576e+07
npumon_peak_active_bytes L 5.767168e+06
npumon_peak_requested_bytes L 5.767168e+06
npumon_peak_reserved_bytes L 1.048576e+07
npumon_cached_free_bytes L 4.718592e+06
npumon_largest_free_block_bytes L 2.097152e+06
npumon_largest_free_block_ratio L 0.4444444444444444
npumon_segments L 2
npumon_live_blocks L 4
npumon_ooms_total L 1
npumon_trace_entries_received_total L 11
npumon_trace_entries_missed_total L 0
`)
}

// withHeaders puts each metric's HELP and TYPE lines above its samples.
func withHeaders(samples string) string {
	byName := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(samples), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			name := line[:strings.IndexAny(line, "{ ")]
			byName[name] = append(byName[name], line)
		}
	}
	var b strings.Builder
	for _, s := range specs {
		if len(byName[s.name]) == 0 {
			continue
		}
		typ := "gauge"
		if s.counter {
			typ = "counter"
		}
		b.WriteString("# HELP " + s.name + " " + s.help + "\n# TYPE " + s.name + " " + typ + "\n")
		for _, l := range byName[s.name] {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func TestCollectorCapture(t *testing.T) {
	c := New(Target{Store: captureStore(t), Rank: 3, PID: 4242})
	want := withHeaders(captureExposition("3", "4242"))
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// An unknown rank or pid gives empty labels, so every series of a process
// still has the same label set.
func TestCollectorUnknownRankPID(t *testing.T) {
	c := New(Target{Store: captureStore(t), Rank: -1})
	want := withHeaders(captureExposition("", ""))
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "npumon_reserved_bytes", "npumon_segments"); err != nil {
		t.Fatal(err)
	}
}

// Several ranks: one series per rank, told apart by the rank label, and the
// collector passes the pedantic registry's consistency checks.
func TestCollectorRanks(t *testing.T) {
	var targets []Target
	var samples strings.Builder
	for r := range 3 {
		targets = append(targets, Target{Store: captureStore(t), Rank: r, PID: 100 + r})
		samples.WriteString(captureExposition(string(rune('0'+r)), "10"+string(rune('0'+r))))
	}
	c := New(targets...)
	if err := testutil.CollectAndCompare(c, strings.NewReader(withHeaders(samples.String()))); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "npumon_reserved_bytes"); n != 3 {
		t.Fatalf("npumon_reserved_bytes: %d series, want 3", n)
	}
}

// A live connection's counts replace the Store's.
func TestCollectorReceived(t *testing.T) {
	c := New(Target{Store: captureStore(t), Rank: -1, PIDFun: func() int { return 7 },
		Received: func() (uint64, uint64) { return 500, 12 }})
	want := withHeaders(`
npumon_trace_entries_received_total{id="0",pid="7",rank=""} 500
npumon_trace_entries_missed_total{id="0",pid="7",rank=""} 12
`)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"npumon_trace_entries_received_total", "npumon_trace_entries_missed_total"); err != nil {
		t.Fatal(err)
	}
}

// An in-process allocator's own counters: torch_npu's rounding (32-byte pad,
// 512-byte blocks), a 2 MiB small segment, and an allocation larger than the
// device that fails after one retry (release the cache, try again).
func TestCollectorAllocator(t *testing.T) {
	rt := acl.NewRuntime(acl.Config{Devices: []acl.DeviceSpec{{HBMBytes: 64 << 20, SystemReserved: -1}}})
	dev, err := rt.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	a, err := allocator.New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Malloc(1000, acl.DefaultStream); err != nil {
		t.Fatal(err)
	}
	p, err := a.Malloc(3000, acl.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Free(p); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Malloc(1<<30, acl.DefaultStream); err == nil {
		t.Fatal("1 GiB on a 64 MiB device: no error")
	}
	st := store.New(store.Options{})
	detach, err := attach.Store(st, []*allocator.Allocator{a}, attach.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	c := New(Target{Store: st, Rank: 0, PID: 1, Allocator: func(int) *allocator.Allocator { return a }})
	want := withHeaders(`
npumon_allocator_requested_bytes{id="0",pid="1",rank="0"} 1000
npumon_allocator_allocated_bytes{id="0",pid="1",rank="0"} 1536
npumon_allocator_active_bytes{id="0",pid="1",rank="0"} 1536
npumon_allocator_reserved_bytes{id="0",pid="1",rank="0"} 2.097152e+06
npumon_allocator_peak_requested_bytes{id="0",pid="1",rank="0"} 4000
npumon_allocator_peak_reserved_bytes{id="0",pid="1",rank="0"} 2.097152e+06
npumon_allocator_alloc_retries_total{id="0",pid="1",rank="0"} 1
npumon_allocator_ooms_total{id="0",pid="1",rank="0"} 1
`)
	var names []string
	for _, s := range specs {
		if strings.HasPrefix(s.name, "npumon_allocator_") {
			names = append(names, s.name)
		}
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct {
		in, addr string
		exposed  bool
		bad      bool
	}{
		{in: ":9464", addr: "127.0.0.1:9464"},
		{in: "127.0.0.1:0", addr: "127.0.0.1:0"},
		{in: "[::1]:9464", addr: "[::1]:9464"},
		{in: "localhost:9464", addr: "localhost:9464"},
		{in: "0.0.0.0:9464", addr: "0.0.0.0:9464", exposed: true},
		{in: "10.1.2.3:9464", addr: "10.1.2.3:9464", exposed: true},
		{in: "node7:9464", addr: "node7:9464", exposed: true},
		{in: "9464", bad: true},
		{in: "127.0.0.1:", bad: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			addr, exposed, err := ListenAddr(tc.in)
			if tc.bad {
				if err == nil {
					t.Errorf("%q: no error", tc.in)
				}
				return
			}
			if err != nil || addr != tc.addr || exposed != tc.exposed {
				t.Errorf("%q: got %q exposed=%v err=%v, want %q exposed=%v", tc.in, addr, exposed, err, tc.addr, tc.exposed)
			}
		})
	}
}

// TestDocsNameEveryMetric: docs/metrics.md has a row for every metric the
// collector can export, with its type.
func TestDocsNameEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range specs {
		typ := "gauge"
		if s.counter {
			typ = "counter"
		}
		if !strings.Contains(doc, "| `"+s.name+"` | "+typ+" |") {
			t.Errorf("docs/metrics.md: no row for %s (%s)", s.name, typ)
		}
	}
}
