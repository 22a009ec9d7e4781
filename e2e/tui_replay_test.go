//go:build e2e

// End-to-end tests of the terminal UI: the real npumon binary runs inside a
// real tmux pane (a real PTY with real key decoding); the tests send keys
// and poll capture-pane until the screen says what they expect.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npumonBin returns the binary under test: $NPUMON_BIN (make test-e2e sets
// it) or a fresh build.
func npumonBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("NPUMON_BIN"); b != "" {
		abs, err := filepath.Abs(b)
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	out := filepath.Join(t.TempDir(), "npumon")
	cmd := exec.Command("go", "build", "-o", out, "../cmd/npumon")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build npumon: %v\n%s", err, b)
	}
	return out
}

// tmuxPane is one detached tmux session running a command, on a tmux
// server of its own (-L) so tests neither race on a shared server's exit
// nor touch the user's sessions.
type tmuxPane struct {
	t    *testing.T
	name string
}

// tmux runs a tmux command against the pane's own server.
func (p *tmuxPane) tmux(args ...string) *exec.Cmd {
	return exec.Command("tmux", append([]string{"-L", p.name}, args...)...)
}

func startTmux(t *testing.T, w, h int, env []string, args ...string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	name := fmt.Sprintf("npumon-e2e-%d-%d", os.Getpid(), time.Now().UnixNano())
	var q []string
	for _, a := range args {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	shell := "env " + strings.Join(env, " ") + " " + strings.Join(q, " ") + "; echo NPUMON_EXIT=$?; sleep 30"
	p := &tmuxPane{t: t, name: name}
	cmd := p.tmux("-f", "/dev/null", "new-session", "-d", "-s", name, "-x", fmt.Sprint(w), "-y", fmt.Sprint(h), shell)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, b)
	}
	t.Cleanup(func() { p.tmux("kill-server").Run() })
	return p
}

func (p *tmuxPane) capture() string {
	b, err := p.tmux("capture-pane", "-t", p.name, "-p").Output()
	if err != nil {
		p.t.Fatalf("capture-pane: %v", err)
	}
	return string(b)
}

// send sends tmux key names (Left, Enter, Escape, q, …).
func (p *tmuxPane) send(keys ...string) {
	p.t.Helper()
	args := append([]string{"send-keys", "-t", p.name}, keys...)
	if b, err := p.tmux(args...).CombinedOutput(); err != nil {
		p.t.Fatalf("send-keys %v: %v\n%s", keys, err, b)
	}
}

// typeText sends literal text.
func (p *tmuxPane) typeText(s string) {
	p.t.Helper()
	if b, err := p.tmux("send-keys", "-t", p.name, "-l", s).CombinedOutput(); err != nil {
		p.t.Fatalf("send-keys -l: %v\n%s", err, b)
	}
}

// waitFor polls the screen until every want appears, failing with the
// last screen after a timeout.
func (p *tmuxPane) waitFor(want ...string) string {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var screen string
	for time.Now().Before(deadline) {
		screen = p.capture()
		ok := true
		for _, w := range want {
			if !strings.Contains(screen, w) {
				ok = false
				break
			}
		}
		if ok {
			return screen
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("screen never showed %q; last screen:\n%s", want, screen)
	return ""
}

// waitGone polls until text is no longer on the screen.
func (p *tmuxPane) waitGone(text string) {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if !strings.Contains(p.capture(), text) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("screen kept showing %q:\n%s", text, p.capture())
}

func fixture(t *testing.T, name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "shared", "fixtures", "snapshots", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not available: %v", name, err)
	}
	return p
}

func TestTUIReplayKeys(t *testing.T) {
	bin := npumonBin(t)
	snap := fixture(t, "cuda-2026-assignment2-memory_snapshot.pickle")
	p := startTmux(t, 120, 40, []string{"TZ=UTC", "NO_COLOR=1"}, bin, "replay", snap)
	p.waitFor("[1 Timeline]", "2 Segments", "3 Events", "entry 5163/5163", "216 segments")

	p.send("g")
	p.waitFor("entry 0/5163")
	p.send("Right", "Right")
	p.waitFor("entry 2/5163")
	p.send("Left")
	p.waitFor("entry 1/5163")
	p.send("p")
	p.waitFor("2026-04-18 02:34:01.223") // the peak of active memory (1776479641223438 µs)
	p.send("G")
	p.waitFor("entry 5163/5163")

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
	snap := fixture(t, "cuda-2.0-flexgen-1.3b_snapshot.pickle")
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
	p := startTmux(t, 100, 30, []string{"TZ=UTC"}, bin, "replay", bad)
	p.waitFor("error:", "bad.pickle")
	p.send("q")
	p.waitFor("NPUMON_EXIT=")
}
