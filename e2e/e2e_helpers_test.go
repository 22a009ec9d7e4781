//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// proc is a background npumon process whose stdout lines the test reads.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	err   strings.Builder // stderr, for failure messages
	done  chan struct{}
}

// startProc starts bin with args; the process is killed at cleanup.
func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &proc{t: t, cmd: exec.CommandContext(ctx, bin, args...), lines: make(chan string, 64), done: make(chan struct{})}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err.Write(b)
	})
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// line returns the next stdout line, failing after timeout.
func (p *proc) line(timeout time.Duration) string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%v ended early; stderr:\n%s", p.cmd.Args, p.stderr())
		}
		return l
	case <-time.After(timeout):
		p.t.Fatalf("%v: no output in %v; stderr:\n%s", p.cmd.Args, timeout, p.stderr())
	}
	return ""
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err.String()
}

// kill ends the process at once (SIGKILL: no goodbye on the socket).
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// runJSON runs bin to completion and decodes its stdout as JSON into v.
func runJSON(t *testing.T, bin string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("%v: %v in %q", args, err, out)
	}
}

// npumonBin returns the binary under test: $NPUMON_BIN (make test-e2e sets
// it) or a fresh build.
func npumonBin(t testing.TB) string {
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
	fixture.Tool(t, "tmux", "tmux")
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

// waitLimit bounds every wait of these tests for a process, a screen or a
// server: it only ends a test that would otherwise hang, so it is far longer
// than any of them takes on a slow, loaded machine.
const waitLimit = time.Minute

// poll captures the screen until ok holds of it, for at most waitLimit; it
// returns the last screen and whether ok held.
func (p *tmuxPane) poll(ok func(screen string) bool) (string, bool) {
	deadline := time.Now().Add(waitLimit)
	for {
		screen := p.capture()
		if ok(screen) {
			return screen, true
		}
		if !time.Now().Before(deadline) {
			return screen, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls the screen until every want appears, failing with the
// last screen after a timeout.
func (p *tmuxPane) waitFor(want ...string) string {
	p.t.Helper()
	screen, ok := p.poll(func(screen string) bool {
		for _, w := range want {
			if !strings.Contains(screen, w) {
				return false
			}
		}
		return true
	})
	if !ok {
		p.t.Fatalf("screen never showed %q; last screen:\n%s", want, screen)
	}
	return screen
}

// waitGone polls until text is no longer on the screen.
func (p *tmuxPane) waitGone(text string) {
	p.t.Helper()
	if screen, ok := p.poll(func(screen string) bool { return !strings.Contains(screen, text) }); !ok {
		p.t.Fatalf("screen kept showing %q:\n%s", text, screen)
	}
}

func snapshotFixture(t *testing.T, name string) string {
	return fixture.Path(t, "snapshots/"+name)
}
