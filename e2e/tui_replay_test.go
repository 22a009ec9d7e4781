//go:build e2e

// End-to-end tests of the terminal UI: the real npumon binary runs inside a
// real tmux pane (a real PTY with real key decoding); the tests send keys
// and poll capture-pane until the screen says what they expect.
package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTUIReplayKeys(t *testing.T) {
	bin := npumonBin(t)
	snap := snapshotFixture(t, "cuda-2026-assignment2-memory_snapshot.pickle")
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", snap)
	p.waitFor("[1 Timeline]", "2 Segments", "3 Events", "entry #5162/5163", "216 segments")

	p.send("g")
	p.waitFor("entry #–/5163")
	p.send("Right", "Right")
	p.waitFor("entry #1/5163")
	p.send("Left")
	p.waitFor("entry #0/5163")
	p.send("p")
	p.waitFor("2026-04-18 02:34:01.223") // the peak of active memory (1776479641223438 µs)
	p.send("G")
	p.waitFor("entry #5162/5163")

	p.send("t")
	p.waitFor("jump to")
	p.typeText("02:34:01.200")
	p.send("Enter")
	p.waitFor("02:34:01.200")

	p.send("/")
	p.typeText("size>100MiB")
	p.send("Enter")
	p.waitFor("filter: size>100MiB")
	p.send("Escape")
	p.waitGone("filter: size>100MiB") // ESC and the next key in one read would be alt+key

	p.send("2")
	p.waitFor("[2 Segments]")
	p.send("Enter")
	p.waitFor("block 0x")

	p.send("?")
	p.waitFor("npumon keys", "next OOM", "play/pause")
	p.send("Escape")
	p.waitGone("npumon keys")
	p.waitFor("[2 Segments]")

	// NO_COLOR: no colour escape sequences on the screen (bold/reverse may remain).
	raw, err := p.tmux("capture-pane", "-t", p.name, "-p", "-e").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "\x1b[38;") || strings.Contains(string(raw), "\x1b[48;") {
		t.Errorf("NO_COLOR screen has colour escapes:\n%q", raw)
	}

	// Resizing to 80×24 switches to the compact layout at once.
	if b, err := p.tmux("resize-window", "-t", p.name, "-x", "80", "-y", "24").CombinedOutput(); err != nil {
		t.Fatalf("resize-window: %v\n%s", err, b)
	}
	p.waitFor("1 Timeline [2 Segments] 3 Events  4 Ops")

	p.send("q")
	p.waitFor("NPUMON_EXIT=0")
}

func TestTUIReplayCompactASCII(t *testing.T) {
	bin := npumonBin(t)
	snap := snapshotFixture(t, "cuda-2.0-flexgen-1.3b_snapshot.pickle")
	p := startTmux(t, 80, 24, []string{"TZ=UTC"}, bin, "replay", "--ascii", snap)
	screen := p.waitFor("[1 Timeline]", "no timestamps in this file")
	for _, r := range screen {
		if r >= 0x80 {
			t.Fatalf("--ascii screen has %q:\n%s", r, screen)
		}
	}
	p.send("4")
	p.waitFor("[4 Ops]")
	p.send("C-c")
	p.waitFor("NPUMON_EXIT=0")
}

func TestTUIReplayBadFile(t *testing.T) {
	bin := npumonBin(t)
	bad := filepath.Join(t.TempDir(), "bad.pickle")
	os.WriteFile(bad, []byte("\x80\x04\x95garbage"), 0o644)
	// Refused on the command line: one line, exit 2, no terminal UI.
	p := startTmux(t, 100, 30, []string{"TZ=UTC"}, bin, "replay", bad)
	screen := p.waitFor("bad.pickle: offset 2: unexpected end of file", "NPUMON_EXIT=2")
	if strings.Contains(screen, "Timeline") {
		t.Errorf("the UI opened for a bad file:\n%s", screen)
	}
}
