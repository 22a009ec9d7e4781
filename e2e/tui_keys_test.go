//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestTUIKeyBursts: key repeat over a slow link sends escape sequences in
// bursts that reads cut anywhere (docs: tui/ttyin, Note [Split escape
// sequences]). 100 shift+→ in one burst move the cursor and nothing else:
// no `[` (speed) and no `2` (Segments focus) leak out of a cut sequence.
// Then 500 → in one burst land on entry 500; the time they take is logged
// (BENCHMARKS.md).
func TestTUIKeyBursts(t *testing.T) {
	bin := npumonBin(t)
	snap := snapshotFixture(t, "cuda-2026-assignment2-memory_snapshot.pickle")
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", snap)
	p.waitFor("[1 Timeline]", "entry #5162/5163")
	p.send("g")
	p.waitFor("entry #–/5163")

	p.send("-N", "100", "S-Right")
	screen := p.waitFor("entry #5162/5163") // 100 × 1/20 of the view reaches the end
	if !strings.Contains(screen, "PAUSED ×1 ") && !strings.HasSuffix(strings.SplitN(screen, "\n", 2)[0], "PAUSED ×1") {
		t.Errorf("the replay speed changed (a `[` leaked):\n%s", screen)
	}
	if !strings.Contains(screen, "[1 Timeline]") || strings.Contains(screen, "[2 Segments]") {
		t.Errorf("the focus moved (a `2` leaked):\n%s", screen)
	}

	p.send("g")
	p.waitFor("entry #–/5163")
	start := time.Now()
	p.send("-N", "500", "Right")
	p.waitFor("entry #499/5163")
	t.Logf("500 cursor keys in one burst: %v until the screen showed entry 500", time.Since(start))

	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestTUINavigation: at 80×24 the help scrolls to its syntax notes; End and
// Home jump through the 216 segments; n walks the entries a filter matches.
func TestTUINavigation(t *testing.T) {
	bin := npumonBin(t)
	snap := snapshotFixture(t, "cuda-2026-assignment2-memory_snapshot.pickle")
	p := startTmux(t, 80, 24, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", snap)
	p.waitFor("[1 Timeline]", "entry #5162/5163")

	p.send("?")
	p.waitFor("npumon keys", "pgup/pgdn scroll")
	p.send("End")
	p.waitFor("Glyphs:", "close the what-if view") // the end of help: the what-if view's keys come last
	p.waitGone("npumon keys")
	p.send("Escape")
	p.waitGone("Glyphs:")

	p.send("2")
	p.waitFor("[2 Segments]", "0xb03000000")
	p.send("End")
	p.waitGone("0xb03000000")
	p.send("Home")
	p.waitFor("▶ 0xb03000000")

	p.send("/")
	p.typeText("^alloc$")
	p.send("Enter", "3")
	p.waitFor("filter: ^alloc$")
	p.send("g")
	p.waitFor("entry #–/5163")
	// The trace opens with three allocs, then free_requested/free_completed.
	p.send("n")
	p.waitFor("entry #0/5163")
	p.send("n", "n", "n")
	p.waitFor("entry #5/5163")
	p.send("N")
	p.waitFor("entry #2/5163")

	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
