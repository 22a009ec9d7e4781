//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// needTool finds a program a test cannot do without: missing, the test is
// skipped on a developer's machine and fails in CI (CI=true), whose setup
// installs it.
func needTool(t *testing.T, name, pkg string) string { return fixture.Tool(t, name, pkg) }

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

var metricsRe = regexp.MustCompile(`^npumon sim: metrics on (http://\S+/metrics)$`)

// promSample is one series of a Prometheus instant-query answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// promQuery asks Prometheus's HTTP API for an instant vector.
func promQuery(t *testing.T, base, q string) []promSample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil // not up yet
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("query %q: %s %s", q, r.Status, r.Error)
	}
	return r.Data.Result
}

func sampleValue(t *testing.T, s promSample) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("sample %v: %v", s, err)
	}
	return v
}

// TestPrometheusScrapesSim: a real Prometheus server scrapes `npumon sim
// --metrics`; once the job has ended, the reserved bytes Prometheus stored
// equal the reserved bytes the sim reports, with the sim's pid and device
// as labels. promtool accepts the endpoint's output, and the rules of
// docs/prometheus, loaded by the server, record from its series.
func TestPrometheusScrapesSim(t *testing.T) {
	promBin := needTool(t, "prometheus", "prometheus")
	promtool := needTool(t, "promtool", "prometheus")
	bin := npumonBin(t)
	dir := t.TempDir()
	sim, pid := startSim(t, bin, "--listen", "unix:"+filepath.Join(dir, "sim.sock"), "--metrics", "127.0.0.1:0",
		"--device-mem", "8GiB", "--layers", "2", "--rate", "20", "--steps", "10")
	l := sim.line(waitLimit)
	m := metricsRe.FindStringSubmatch(l)
	if m == nil {
		t.Fatalf("sim's metrics line %q", l)
	}
	endpoint := m[1]
	target := strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/metrics")

	rules, err := filepath.Abs("../docs/prometheus/npumon-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"+
		"rule_files: ['%s']\nscrape_configs:\n"+
		"  - job_name: npumon-e2e\n    static_configs:\n      - targets: ['%s']\n", rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	prom := startProc(t, promBin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	base := "http://" + promAddr

	// the job's end: from here on the sim's figures no longer change
	var want simSummary
	if err := json.Unmarshal([]byte(sim.line(waitLimit)), &want); err != nil {
		t.Fatal(err)
	}
	ended := float64(time.Now().UnixMilli()) / 1000

	// wait for a scrape taken after the job's end
	sel := `npumon_reserved_bytes{job="npumon-e2e"}`
	deadline := time.Now().Add(waitLimit)
	for {
		res := promQuery(t, base, "timestamp("+sel+")")
		if len(res) == 1 && sampleValue(t, res[0]) > ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scrape after the job's end in %v (last answer %v); prometheus stderr:\n%s", waitLimit, res, prom.stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
	res := promQuery(t, base, sel)
	if len(res) != 1 {
		t.Fatalf("%s: %d series, want 1: %v", sel, len(res), res)
	}
	if got := sampleValue(t, res[0]); got != float64(want.ReservedBytes) || want.ReservedBytes == 0 {
		t.Fatalf("Prometheus stored reserved bytes %v; sim reports %d", got, want.ReservedBytes)
	}
	if lb := res[0].Metric; lb["pid"] != pid || lb["id"] != "0" || lb["instance"] != target || lb["source"] != "sim" {
		t.Fatalf("labels %v: want pid %s, id 0, instance %s, source sim", lb, pid, target)
	}
	if up := promQuery(t, base, `up{job="npumon-e2e"}`); len(up) != 1 || sampleValue(t, up[0]) != 1 {
		t.Fatalf("up: %v", up)
	}

	// docs/prometheus's rules, loaded by the server, record from the real series
	deadline = time.Now().Add(waitLimit)
	for {
		rec := promQuery(t, base, `npumon:free_cache_fragmentation:ratio{job="npumon-e2e",source="sim"}`)
		if len(rec) == 1 {
			if v := sampleValue(t, rec[0]); v < 0 || v > 1 {
				t.Fatalf("npumon:free_cache_fragmentation:ratio %v, want 0…1", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rules recorded no npumon:free_cache_fragmentation:ratio (last answer %v); prometheus stderr:\n%s", rec, prom.stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// the endpoint's own text passes promtool's lint
	resp, err := http.Get(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(body))
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\n--- endpoint output:\n%s", err, out, body)
	}
}

var exporterRe = regexp.MustCompile(`^npumon exporter: metrics on (http://\S+/metrics)$`)

// TestExporterSources: the headless exporter attaches to a live sim and
// watches a directory holding a real capture; its /metrics carries the
// sim's reserved bytes under the sim's pid and the capture's reserved bytes
// as `npumon stats` computes them.
func TestExporterSources(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "sim.sock")
	capDir := filepath.Join(dir, "dumps")
	if err := os.Mkdir(capDir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := snapshotFixture(t, "cuda-2.0-flexgen-1.3b_snapshot.pickle")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(capDir, "snapshot.pickle"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stats struct {
		Devices []struct {
			Device        int   `json:"device"`
			ReservedBytes int64 `json:"reserved_bytes"`
		} `json:"devices"`
	}
	runJSON(t, bin, &stats, "stats", "--json", src)
	if len(stats.Devices) == 0 {
		t.Fatal("stats: no devices")
	}

	sim, pid := startSim(t, bin, "--listen", "unix:"+sock, "--device-mem", "8GiB", "--layers", "2", "--rate", "20", "--steps", "5")
	var want simSummary
	if err := json.Unmarshal([]byte(sim.line(waitLimit)), &want); err != nil {
		t.Fatal(err)
	}
	exp := startProc(t, bin, "exporter", "--metrics", "127.0.0.1:0", "unix:"+sock, capDir)
	var endpoint string
	for endpoint == "" {
		if m := exporterRe.FindStringSubmatch(exp.line(waitLimit)); m != nil {
			endpoint = m[1]
		}
	}
	wantLive := fmt.Sprintf(`npumon_reserved_bytes{id="0",pid="%s",rank="",source="unix:%s"} %v`, pid, sock, float64(want.ReservedBytes))
	d := stats.Devices[0]
	wantDir := fmt.Sprintf(`npumon_reserved_bytes{id="%d",pid="",rank="",source="%s"} %v`, d.Device, capDir, float64(d.ReservedBytes))
	deadline := time.Now().Add(waitLimit)
	var body string
	for {
		resp, err := http.Get(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, wantLive) && strings.Contains(body, wantDir) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed\n%s\n%s\nlast answer:\n%s\nstderr:\n%s", wantLive, wantDir, body, exp.stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestExporterRanks: the exporter on a job directory (three ranks' files,
// monitor/ranks/jobdir/testdata/gen_ranks.py) exports each rank's reserved bytes
// under its rank label.
func TestExporterRanks(t *testing.T) {
	bin := npumonBin(t)
	job, err := filepath.Abs("../monitor/ranks/jobdir/testdata/job")
	if err != nil {
		t.Fatal(err)
	}
	exp := startProc(t, bin, "exporter", "--metrics", "127.0.0.1:0", job)
	var endpoint string
	for endpoint == "" {
		if m := exporterRe.FindStringSubmatch(exp.line(waitLimit)); m != nil {
			endpoint = m[1]
		}
	}
	want := []string{
		`npumon_reserved_bytes{id="0",pid="",rank="0",source="` + job + `"} 2.097152e+07`,
		`npumon_reserved_bytes{id="1",pid="",rank="1",source="` + job + `"} 4.194304e+07`,
		`npumon_reserved_bytes{id="2",pid="",rank="2",source="` + job + `"} 3.145728e+07`,
		`npumon_ooms_total{id="1",pid="",rank="1",source="` + job + `"} 1`,
	}
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				missing = w
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed %s:\n%s", missing, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExporterDistinctSources: two directories holding the same capture
// give two sets of series, told apart by their source label (they once
// had the same labels and one vanished from /metrics); one directory named
// twice, under two spellings, is refused at start with one line naming both.
func TestExporterDistinctSources(t *testing.T) {
	bin := npumonBin(t)
	dir := t.TempDir()
	data, err := os.ReadFile(snapshotFixture(t, "cuda-2.0-flexgen-1.3b_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	dirA, dirB := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{dirA, dirB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "snapshot.pickle"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// refused at start: an exporter that serves instead is stopped after waitLimit
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	dup := exec.CommandContext(ctx, bin, "exporter", "--metrics", "127.0.0.1:0", dirA, dirB, dirA+"/")
	var stderr strings.Builder
	dup.Stderr = &stderr
	if err := dup.Run(); err == nil || ctx.Err() != nil {
		t.Fatalf("exporter %s %s %s/: %v after %v, want it refused at start", dirA, dirB, dirA, err, waitLimit)
	}
	wantErr := fmt.Sprintf("sources %s and %s/ are the same (their series would have the same labels, source=%q): give it once", dirA, dirA, dirA)
	if got := strings.TrimSpace(stderr.String()); !strings.Contains(got, wantErr) || strings.Count(got, "\n") > 0 {
		t.Fatalf("stderr %q, want one line with %q", got, wantErr)
	}

	exp := startProc(t, bin, "exporter", "--metrics", "127.0.0.1:0", dirA, dirB)
	var endpoint string
	for endpoint == "" {
		if m := exporterRe.FindStringSubmatch(exp.line(waitLimit)); m != nil {
			endpoint = m[1]
		}
	}
	re := regexp.MustCompile(`(?m)^npumon_reserved_bytes\{id="0",pid="",rank="",source="([^"]*)"\} (\S+)$`)
	deadline := time.Now().Add(waitLimit)
	for {
		resp, err := http.Get(endpoint)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got := map[string]string{}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			got[m[1]] = m[2]
		}
		if len(got) == 2 && got[dirA] != "" && got[dirA] == got[dirB] {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics never showed npumon_reserved_bytes for both %s and %s (got %v):\n%s\nstderr:\n%s", dirA, dirB, got, b, exp.stderr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
