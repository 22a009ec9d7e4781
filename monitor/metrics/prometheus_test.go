package metrics

// Checks of docs/prometheus: the rules and alerts (promtool check and
// promtool's unit tests) and the Grafana dashboard (every query parses as
// PromQL and names only series npumon or npu-exporter serve).
//
// PromQL is parsed by promtool, not by a Go parser: the prometheus/prometheus
// module that holds the parser would pull a large dependency tree into
// go.mod for a test. Each dashboard query is written as a recording rule
// into a temporary rules file and `promtool check rules` parses them all;
// metric names come from the small tokenizer below (metricNames). Without
// promtool the parse is skipped with a note, and fails under CI=true or
// REQUIRE_PROMTOOL=1 (.ci/run installs it, Debian's prometheus package).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

const promDir = "../../docs/prometheus"

// promtool finds promtool, or skips (fails where it is required).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("REQUIRE_PROMTOOL") == "1" || os.Getenv("CI") == "true" {
		t.Fatal("promtool not installed (apt-get install prometheus); REQUIRE_PROMTOOL=1 or CI needs it")
	}
	t.Skip("promtool not installed (apt-get install prometheus): PromQL not parsed")
	return ""
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// npumonNames are the metric names the Collector describes.
func npumonNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 100)
	New().Describe(ch)
	close(ch)
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		names[m[1]] = true
	}
	if len(names) < 20 {
		t.Fatalf("the collector describes %d metrics", len(names))
	}
	return names
}

// npuExporterNames are the npu-exporter series docs/metrics.md lists (its
// section "npu-exporter's series"): the first column of that table.
func npuExporterNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n### npu-exporter's series\n")
	if !ok {
		t.Fatal(`docs/metrics.md: no section "### npu-exporter's series"`)
	}
	if i := strings.Index(sec, "\n#"); i >= 0 {
		sec = sec[:i]
	}
	re := regexp.MustCompile("(?m)^\\| `(npu_[a-z0-9_]+|container_npu_[a-z0-9_]+)` \\|")
	names := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(sec, -1) {
		names[m[1]] = true
	}
	if len(names) == 0 {
		t.Fatal("docs/metrics.md: the npu-exporter table names no series")
	}
	return names
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'` + "|`[^`]*`")
	promBraces   = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promToken    = regexp.MustCompile(`[0-9.][0-9a-zA-Z_.]*(?:[eE][+-][0-9]+)?|[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
		"ignoring": true, "group_left": true, "group_right": true, "offset": true, "bool": true, "atan2": true,
		"inf": true, "nan": true}
)

// metricNames are the metric names a PromQL expression selects: string
// literals, label matchers, ranges and grouping label lists removed, what
// is left is numbers, durations, keywords, functions (a name before "(")
// and metric names.
func metricNames(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promBraces.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promToken.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if c := tok[0]; c >= '0' && c <= '9' || c == '.' || promKeywords[strings.ToLower(tok)] {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or aggregation
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`npumon_reserved_bytes`, []string{"npumon_reserved_bytes"}},
		{`sum by (host, id) (npumon_reserved_bytes{pid!="", source=~"a{b}"}) / on(host, id) group_left() (max by (host) (npu_chip_info_hbm_total_memory) * 1048576)`,
			[]string{"npumon_reserved_bytes", "npu_chip_info_hbm_total_memory"}},
		{`increase(npumon_ooms_total[5m] offset 1h) > 0 or (npumon_ooms_total > bool 1e+06 unless x:y:z offset 10m) or vector(0)`,
			[]string{"npumon_ooms_total", "x:y:z"}},
		{`min_over_time((1 - npumon_largest_free_block_ratio)[30m:1m]) > Inf`, []string{"npumon_largest_free_block_ratio"}},
		{`sum(rate(foo_total[1m])) without (pid) and on() count(bar)`, []string{"foo_total", "bar"}},
		{`label_replace(up, "a", "$1", "instance", "(.*):.*")`, []string{"up"}},
		{`max(npumon_segments) by (rank)`, []string{"npumon_segments"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// TestRulesPromtool: the rules and the example configuration pass promtool's
// checks, and the rules pass their unit tests (npumon-rules.test.yml).
func TestRulesPromtool(t *testing.T) {
	runPromtool(t, "check", "rules", filepath.Join(promDir, "npumon-rules.yml"))
	runPromtool(t, "check", "config", filepath.Join(promDir, "prometheus.yml"))
	runPromtool(t, "test", "rules", filepath.Join(promDir, "npumon-rules.test.yml"))
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestRulesNameKnownMetrics: every rule selects only series npumon or
// npu-exporter serve, or that the file records; every alert has a unit test
// in which it fires and a line in docs/metrics.md.
func TestRulesNameKnownMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(promDir, "npumon-rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatal(err)
	}
	known := npumonNames(t)
	for n := range npuExporterNames(t) {
		known[n] = true
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				known[r.Record] = true
			}
		}
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
			for _, n := range metricNames(r.Expr) {
				if !known[n] {
					t.Errorf("rule %s%s: %s is not a series npumon or npu-exporter serves (docs/metrics.md)", r.Record, r.Alert, n)
				}
			}
		}
	}
	if len(alerts) < 4 {
		t.Fatalf("%d alerts", len(alerts))
	}

	tb, err := os.ReadFile(filepath.Join(promDir, "npumon-rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(tb, &tf); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tf.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("alert %s: no unit test in npumon-rules.test.yml in which it fires", a)
		}
		if !strings.Contains(string(doc), "| `"+a+"` |") {
			t.Errorf("alert %s: no row in docs/metrics.md", a)
		}
	}
}

// dashboardQueries are the PromQL expressions of a Grafana dashboard: every
// panel target's expr (rows' panels included) and the metric selector of
// each query variable (label_values(SELECTOR, label)).
func dashboardQueries(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var d struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	q := map[string]string{}
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q target %s: no expr", p.Title, tg.RefID)
					continue
				}
				q["panel "+p.Title+" "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	lv := regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var s string
		if json.Unmarshal(v.Query, &s) != nil {
			var o struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &o); err != nil {
				t.Fatalf("variable %s: query %s", v.Name, v.Query)
			}
			s = o.Query
		}
		m := lv.FindStringSubmatch(strings.TrimSpace(s))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(SELECTOR, label)", v.Name, s)
			continue
		}
		q["variable "+v.Name] = m[1]
	}
	return q
}

// grafanaVar is a dashboard variable: $name, ${name} or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)(?::[a-z]+)?\}|\$([a-zA-Z0-9_]+)`)

// expandVars puts what Grafana would in place of its variables: a range
// for the built-in intervals, a regular expression matching anything for
// the dashboard's own (they stand in =~ matchers). A variable used anywhere
// else no longer parses.
func expandVars(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__") {
			return "5m"
		}
		return ".*"
	})
}

// TestDashboardQueries: every query of docs/prometheus/npumon-dashboard.json
// names only series npumon (its collector's descriptions) or npu-exporter
// (docs/metrics.md's list) serve, and parses as PromQL (promtool).
func TestDashboardQueries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(promDir, "npumon-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries := dashboardQueries(t, b)
	if len(queries) < 10 {
		t.Fatalf("%d queries", len(queries))
	}
	npumon, exporter := npumonNames(t), npuExporterNames(t)
	usedNpumon, usedExporter := false, false
	keys := make([]string, 0, len(queries))
	for k := range queries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, k := range keys {
		names := metricNames(queries[k])
		if len(names) == 0 {
			t.Errorf("%s: %q names no series", k, queries[k])
		}
		for _, n := range names {
			switch {
			case npumon[n]:
				usedNpumon = true
			case exporter[n]:
				usedExporter = true
			default:
				t.Errorf("%s: %s is not a series npumon or npu-exporter serves (docs/metrics.md)", k, n)
			}
		}
		rules = append(rules, rule{Record: "dashboard:query:" + string(rune('a'+i/26)) + string(rune('a'+i%26)), Expr: expandVars(queries[k])})
	}
	if !usedNpumon || !usedExporter {
		t.Errorf("the dashboard uses npumon's series: %v, npu-exporter's: %v; want both", usedNpumon, usedExporter)
	}

	// JSON is YAML: the rules file promtool reads
	rf := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	out, err := json.MarshalIndent(rf, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := promtool(t)
	if msg, err := exec.Command(bin, "check", "rules", path).CombinedOutput(); err != nil {
		var which strings.Builder
		for i, k := range keys {
			which.WriteString(rules[i].Record + ": " + k + "\n")
		}
		t.Fatalf("promtool check rules (the dashboard's queries): %v\n%s\nwhich rule is which query:\n%s", err, msg, which.String())
	}
}
