//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
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
