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
// with the rank, pid and source labels given.
func captureExposition(rank, pid, source string) string {
	l := `{id="0",pid="` + pid + `",rank="` + rank + `",source="` + source + `"}`
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
	c := New(Target{Store: captureStore(t), Rank: 3, PID: 4242, Source: "/dumps/job"})
	want := withHeaders(captureExposition("3", "4242", "/dumps/job"))
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// An unknown rank or pid gives empty labels, so every series of a process
// still has the same label set.
func TestCollectorUnknownRankPID(t *testing.T) {
	c := New(Target{Store: captureStore(t), Rank: -1, Source: "/dumps"})
	want := withHeaders(captureExposition("", "", "/dumps"))
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
		targets = append(targets, Target{Store: captureStore(t), Rank: r, PID: 100 + r, Source: "/job"})
		samples.WriteString(captureExposition(string(rune('0'+r)), "10"+string(rune('0'+r)), "/job"))
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
	c := New(Target{Store: captureStore(t), Rank: -1, Source: "unix:/run/p.sock", PIDFun: func() int { return 7 },
		Received: func() (uint64, uint64) { return 500, 12 }})
	want := withHeaders(`
npumon_trace_entries_received_total{id="0",pid="7",rank="",source="unix:/run/p.sock"} 500
npumon_trace_entries_missed_total{id="0",pid="7",rank="",source="unix:/run/p.sock"} 12
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
	c := New(Target{Store: st, Rank: 0, PID: 1, Source: "sim", Allocator: func(int) *allocator.Allocator { return a }})
	want := withHeaders(`
npumon_allocator_requested_bytes{id="0",pid="1",rank="0",source="sim"} 1000
npumon_allocator_allocated_bytes{id="0",pid="1",rank="0",source="sim"} 1536
npumon_allocator_active_bytes{id="0",pid="1",rank="0",source="sim"} 1536
npumon_allocator_reserved_bytes{id="0",pid="1",rank="0",source="sim"} 2.097152e+06
npumon_allocator_peak_requested_bytes{id="0",pid="1",rank="0",source="sim"} 4000
npumon_allocator_peak_reserved_bytes{id="0",pid="1",rank="0",source="sim"} 2.097152e+06
npumon_allocator_alloc_retries_total{id="0",pid="1",rank="0",source="sim"} 1
npumon_allocator_ooms_total{id="0",pid="1",rank="0",source="sim"} 1
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

// Two directories holding the same capture: one set of series each, told
// apart by the source label (the registry would otherwise keep one and
// drop the other without a word).
func TestCollectorSources(t *testing.T) {
	c := New(Target{Store: captureStore(t), Rank: -1, Source: "/a"}, Target{Store: captureStore(t), Rank: -1, Source: "/b"})
	want := withHeaders(captureExposition("", "", "/a") + captureExposition("", "", "/b"))
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	reg, err := Registry(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// Targets whose series would have the same labels are refused, naming both
// as the user gave them; the registry refuses them too.
func TestDistinct(t *testing.T) {
	st := captureStore(t)
	for _, tc := range []struct {
		name    string
		targets []Target
		err     string
	}{
		{name: "two dirs", targets: []Target{{Store: st, Rank: -1, Source: "/a"}, {Store: st, Rank: -1, Source: "/b"}}},
		{name: "ranks of one job", targets: []Target{{Store: st, Rank: 0, Source: "/job"}, {Store: st, Rank: 1, Source: "/job"}}},
		{name: "same dir, two spellings",
			targets: []Target{{Store: st, Rank: -1, Source: "/x/a", Name: "a"}, {Store: st, Rank: -1, Source: "/x/b", Name: "b"},
				{Store: st, Rank: -1, Source: "/x/a", Name: "./a/"}},
			err: `sources a and ./a/ are the same (their series would have the same labels, source="/x/a"): give it once`},
		{name: "same address twice",
			targets: []Target{{Store: st, Rank: -1, Source: "tcp:h:1"}, {Store: st, Rank: -1, Source: "tcp:h:1"}},
			err:     `source tcp:h:1 is given twice (its series would have the same labels, source="tcp:h:1"): give it once`},
		{name: "same rank of one job",
			targets: []Target{{Store: st, Rank: 2, Source: "/job", Name: "job"}, {Store: st, Rank: 2, Source: "/job", Name: "/job"}},
			err:     `sources job and /job are the same (their series would have the same labels, source="/job" rank="2"): give it once`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Distinct(tc.targets)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("got %v\nwant %s", err, tc.err)
			}
			if _, err := Registry(New(tc.targets...)); err == nil {
				t.Fatal("Registry: no error")
			}
		})
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
