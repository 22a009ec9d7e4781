//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGQUIT and SIGABRT leave the terminal as it was: the main screen back
// (tmux's alternate_on is 0) and the tty in cooked mode with echo, not
// raw; the process still ends as those signals end it (exit 2, Go's dump).
func TestTerminalRestoredOnFatalSignals(t *testing.T) {
	bin := npumonBin(t)
	for _, sig := range []syscall.Signal{syscall.SIGQUIT, syscall.SIGABRT} {
		t.Run(sig.String(), func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			p := startTmux(t, 120, 40, []string{"NO_COLOR=1", "TZ=UTC"},
				"sh", "-c", "echo $$ >"+pidFile+"; exec \"$0\" demo", bin)
			p.waitFor("[1 Timeline]", "LIVE")
			tty := strings.TrimSpace(p.display("#{pane_tty}"))
			if p.display("#{alternate_on}") != "1" || !strings.Contains(stty(t, tty), "-icanon") {
				t.Fatalf("the TUI did not take the terminal: alternate_on %q, stty %s", p.display("#{alternate_on}"), stty(t, tty))
			}
			b, err := os.ReadFile(pidFile)
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatal(err)
			}
			p.waitFor("NPUMON_EXIT=2")
			if on := p.display("#{alternate_on}"); on != "0" {
				t.Errorf("alternate screen still on after %v", sig)
			}
			st := stty(t, tty)
			for _, bad := range []string{"-icanon", "-echo ", "-isig"} {
				if strings.Contains(st, bad) {
					t.Errorf("tty left %s after %v: %s", bad, sig, st)
				}
			}
		})
	}
}

// display prints a tmux format of the pane.
func (p *tmuxPane) display(format string) string {
	p.t.Helper()
	b, err := p.tmux("display-message", "-p", "-t", p.name, format).Output()
	if err != nil {
		p.t.Fatalf("display-message: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// stty reads the mode of tty from outside.
func stty(t *testing.T, tty string) string {
	t.Helper()
	var out []byte
	var err error
	for range 20 { // the tty may be changing mode this instant
		if out, err = exec.Command("stty", "-a", "-F", tty).Output(); err == nil {
			return string(out) + " "
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stty -F %s: %v", tty, err)
	return ""
}
