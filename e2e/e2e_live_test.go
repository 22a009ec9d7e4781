//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// simSummary is the JSON line sim prints when its job ends.
type simSummary struct {
	PID            int   `json:"pid"`
	Steps          int   `json:"steps"`
	Published      int64 `json:"published_entries"`
	ReservedBytes  int64 `json:"reserved_bytes"`
	RequestedBytes int64 `json:"requested_bytes"`
	Segments       int64 `json:"segments"`
	OOMs           int64 `json:"ooms"`
}

// liveSummary is the --headless JSON of attach / watch / demo.
type liveSummary struct {
	Source        string `json:"source"`
	Entries       int64  `json:"entries"`
	Applied       int64  `json:"applied"`
	ActiveBytes   int64  `json:"active_bytes"`
	ReservedBytes int64  `json:"reserved_bytes"`
	Segments      int64  `json:"segments"`
	OOMs          int64  `json:"ooms"`
	Connection    string `json:"connection"`
	ProducerPID   int    `json:"producer_pid"`
	Received      int64  `json:"received_entries"`
	Missed        int64  `json:"missed_entries"`
	Open          string `json:"open"`
	Ops           int    `json:"ops"`
	Captures      []struct {
		Kind     string `json:"kind"`
		Path     string `json:"path"`
		Existing bool   `json:"existing"`
	} `json:"captures"`
	Errors []string `json:"errors"`
}

var servingRe = regexp.MustCompile(`^npumon sim: pid (\d+) serving on (\S+) `)

// startSim starts `npumon sim` and waits for its "serving on" line.
func startSim(t *testing.T, bin string, args ...string) (*proc, string) {
	t.Helper()
	p := startProc(t, bin, append([]string{"sim"}, args...)...)
	l := p.line(waitLimit)
	m := servingRe.FindStringSubmatch(l)
	if m == nil {
		t.Fatalf("sim's first line %q", l)
	}
	return p, m[1]
}

// TestSimAttachSameTotals: attach streams a sim's job over a Unix socket and
// ends with the totals the sim reports — reserved bytes, segments, the
// requested bytes npumon's active series counts, and the OOMs.
func TestSimAttachSameTotals(t *testing.T) {
	bin := npumonBin(t)
	sock := filepath.Join(t.TempDir(), "sim.sock")
	sim, pid := startSim(t, bin, "--listen", "unix:"+sock, "--scenario", "oom", "--device-mem", "8GiB",
		"--layers", "2", "--rate", "20", "--steps", "30")
	got := make(chan liveSummary, 1)
	go func() {
		var s liveSummary
		// the window must outlast the job, which started with the sim (30
		// steps paced at 20/s: 1.5 s of wall time unless a step's work
		// takes over 50 ms, which it does not on a machine even several
		// times slower): the summary is then of the ended job
		runJSON(t, bin, &s, "attach", "unix:"+sock, "--headless", "8s")
		got <- s
	}()
	var want simSummary
	if err := json.Unmarshal([]byte(sim.line(waitLimit)), &want); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.Connection != "connected" || s.ProducerPID != want.PID || want.PID == 0 || pid == "" || s.Missed != 0 || s.Received == 0 {
		t.Fatalf("connection: %+v (sim pid %s)", s, pid)
	}
	if want.Steps != 30 || want.OOMs == 0 {
		t.Fatalf("sim summary %+v", want)
	}
	if s.ReservedBytes != want.ReservedBytes || s.Segments != want.Segments || s.ActiveBytes != want.RequestedBytes ||
		s.OOMs != int64(want.OOMs) || s.Applied != s.Entries {
		t.Fatalf("attach saw reserved %d segments %d active %d OOMs %d (applied %d/%d); sim reports %+v",
			s.ReservedBytes, s.Segments, s.ActiveBytes, s.OOMs, s.Applied, s.Entries, want)
	}
}

// TestAttachReconnects: killing the producer leaves attach showing
// "disconnected"; a new producer on the same socket is picked up.
func TestAttachReconnects(t *testing.T) {
	bin := npumonBin(t)
	sock := filepath.Join(t.TempDir(), "sim.sock")
	sim, pid := startSim(t, bin, "--listen", "unix:"+sock, "--layers", "2", "--rate", "5")
	p := startTmux(t, 120, 40, []string{"NO_COLOR=1"}, bin, "attach", "unix:"+sock)
	p.waitFor("connected pid "+pid+"@", "[1 Timeline]", "LIVE")
	sim.kill()
	screen := p.waitFor("disconnected", "reconnecting")
	if !regexp.MustCompile(`entry #\d+/`).MatchString(screen) {
		t.Errorf("data lost on disconnect:\n%s", screen)
	}
	_, pid2 := startSim(t, bin, "--listen", "unix:"+sock, "--layers", "2", "--rate", "5")
	screen = p.waitFor("connected pid " + pid2 + "@")
	if strings.Contains(screen, "disconnected") {
		t.Errorf("still disconnected:\n%s", screen)
	}
	p.waitFor("↻") // the restart marker on the timeline (docs/retention.md)
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
