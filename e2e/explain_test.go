//go:build e2e

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestTUIHoldersInTmux: in a replay, h lists the holders at the peak, enter
// a group's allocations, v a whole stack; esc walks back; on a block of
// the segment map v shows its stack too.
func TestTUIHoldersInTmux(t *testing.T) {
	bin := npumonBin(t)
	snap := snapshotFixture(t, "cuda-2026-assignment2-memory_snapshot.pickle")
	p := startTmux(t, 80, 24, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", snap)
	p.waitFor("entry #5162/5163")
	p.send("p")
	p.waitFor("entry #1402/5163")
	p.send("h")
	p.waitFor("Holders by", "504 live allocations", "forward (…\\model.py:39)")
	p.send("Enter")
	p.waitFor("25 allocations of forward")
	p.send("v")
	// library frames fold into one line each run; x unfolds them
	p.waitFor("innermost first", "library frames (x: unfold)", "forward  D:\\Dev")
	p.send("x")
	p.waitFor("einsum", "forward  D:\\Dev")
	p.send("Escape")
	p.waitGone("innermost first")
	p.send("Escape")
	p.waitGone("25 allocations of")
	p.send("b")
	p.waitFor("Holders by stack")
	p.send("Escape")
	p.waitGone("Holders by")
	p.send("2")
	p.send("Enter")
	p.waitFor("block 0xb03000000")
	p.send("v")
	p.waitFor("innermost first", "model.py:54")
	p.send("Escape", "?")
	p.waitFor("npumon keys", "next OOM: its panel")
	// scroll the help down line by line until the explain keys are on the screen
	for i := 0; ; i++ {
		sc := p.capture()
		if strings.Contains(sc, "holders: group by") && strings.Contains(sc, "mark A") && strings.Contains(sc, "view the whole stack") {
			break
		}
		if i == 60 {
			t.Fatalf("the help never showed the explain keys:\n%s", sc)
		}
		p.send("Down")
		// one line at a time: the next Down only once this one has scrolled
		// (a slow app must not get a burst that scrolls past the keys)
		if last, ok := p.poll(func(screen string) bool { return screen != sc }); !ok {
			t.Fatalf("Down did not scroll the help, which never showed the explain keys:\n%s", last)
		}
	}
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestTUIOOMPanelInTmux: o lands on an oom entry's panel: the verdict, the
// op it belongs to (the snapshot's record_function ranges) and the failing
// request's stack.
func TestTUIOOMPanelInTmux(t *testing.T) {
	bin := npumonBin(t)
	snap, err := filepath.Abs("../replay/testdata/leak_steps.pickle")
	if err != nil {
		t.Fatal(err)
	}
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", snap)
	p.waitFor("entry #35/36")
	p.send("g")
	p.waitFor("entry #–/36")
	p.send("o")
	p.waitFor("Out of memory at entry #35", "fragmentation", "aten::cat", "KVCache.append  /job/cache.py:33", "log_hidden_states")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

// TestDemoOOMPanelInTmux: live, the demo's oom scenario: o shows the OOM
// attributed to aten::cat with the KVCache.append frame, and h the
// holders, with the cache on top.
func TestDemoOOMPanelInTmux(t *testing.T) {
	bin := npumonBin(t)
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "demo", "--scenario", "oom",
		"--device-mem", "2GiB", "--layers", "2", "--rate", "200")
	p.waitFor("OOM 2") // two OOMs recorded
	p.send("Space")
	p.waitFor("PAUSED")
	p.send("g")
	p.send("o")
	p.waitFor("Out of memory at entry", "op                   aten::cat", "KVCache.append  cache.py:33")
	p.send("h")
	p.waitFor("Holders by", "KVCache.append (cache.py:33)")
	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}
