//go:build e2e

package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestTUIReplayProgressive opens a file big enough to be still loading
// when the first screen comes up (past the 16 MiB that is read whole
// before the UI opens): keys work while it loads, the progress shows, and
// once loaded the header is the normal one, at the file's end, with no
// progress bar. The file is written by Python's pickle (gen_bench.py),
// independent of the decoder under test.
//
// What a load in progress looks like depends on the loader: one that
// fills the Store as it decodes shows the panes under a progress bar
// (logged as seen); one that fills it at the end shows the loading screen
// until then. Both must pass; the assertions are what holds for both.
func TestTUIReplayProgressive(t *testing.T) {
	bin := npumonBin(t)
	py := fixture.Tool(t, "python3", "python3")
	snap := filepath.Join(t.TempDir(), "progressive.pickle")
	// 400 000 entries of the real-shaped "distinct" kind: about 35 MB, a few
	// seconds to write, about half a second to load.
	if b, err := exec.Command(py, "../replay/testdata/gen_bench.py", snap, "400000", "distinct").CombinedOutput(); err != nil {
		t.Fatalf("gen_bench.py: %v\n%s", err, b)
	}
	p := startTmux(t, 80, 24, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", "--ascii", snap)

	// loading: its own screen ("q quits") or the panes with "+" (more to
	// come); a fast host may already show the loaded file
	more := regexp.MustCompile(`entry #[0-9–-]+/[0-9]+\+`)
	p.poll(func(s string) bool { return strings.Contains(s, "q quits") || strings.Contains(s, "entry #") })

	// Keys never wait on the load: help opens and closes whatever its stage.
	p.send("?")
	help := p.waitFor("npumon keys")
	t.Logf("help opened while loading: %v", strings.Contains(help, "loading...") || more.MatchString(help))
	p.send("Escape")
	p.waitGone("npumon keys")

	done := regexp.MustCompile(`entry #([0-9]+)/([0-9]+) `)
	var bar bool
	screen, ok := p.poll(func(s string) bool {
		if strings.Contains(s, "ETA") && strings.Contains(s, "Timeline") {
			bar = true // the panes under a progress bar: a progressive load
		}
		return done.MatchString(s) && !strings.Contains(s, "ETA")
	})
	if !ok {
		t.Fatalf("the load never ended; last screen:\n%s", screen)
	}
	t.Logf("progress bar over the loaded part seen: %v", bar)
	m := done.FindStringSubmatch(screen)
	last, _ := strconv.Atoi(m[1])
	if n, _ := strconv.Atoi(m[2]); n < 400000 || last != n-1 {
		t.Fatalf("the loaded file should open at its last entry: %q", m[0])
	}
	for _, want := range []string{"PAUSED x1", "Timeline", "? help"} {
		if !strings.Contains(screen, want) {
			t.Fatalf("loaded screen lacks %q:\n%s", want, screen)
		}
	}
	for _, not := range []string{"AT END", "decoding", "loading", "load failed"} {
		if strings.Contains(screen, not) {
			t.Fatalf("loaded screen still says %q:\n%s", not, screen)
		}
	}

	p.send("Left")
	p.waitFor("entry #" + strconv.Itoa(last-1) + "/" + m[2])

	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
