// Package devpoll polls the host's devices in the background: it runs
// `npu-smi info` (and, when asked, `npu-smi info -t usages -i N` per NPU)
// every interval and keeps the newest parsed table, so a view asks for the
// newest sample and never waits on the tool. NewFunc feeds the same samples
// from a function instead (the simulated runtime of demo), NewFuncAt with
// the moment each reading is of.
package devpoll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/npumon/npumon/monitor/npusmi"
)

// Options configure an npu-smi poller.
type Options struct {
	// Path is the npu-smi executable; a bare name is looked up on PATH
	// (default "npu-smi").
	Path string
	// Every is the polling interval (default 1s).
	Every time.Duration
	// Timeout bounds one npu-smi call (default 10s); a hung tool is killed.
	Timeout time.Duration
	// Usages also runs `npu-smi info -t usages -i N` for each NPU.
	Usages bool
	// Always polls from Run's start; otherwise polling runs only while
	// someone asks for samples (Latest within the last three intervals),
	// so a view that is not shown costs no npu-smi calls.
	Always bool
}

// maxOutput bounds what one call may print; a real table is a few KiB.
// A tool printing more is killed at once (not at the timeout), and the
// parsers bound each line (npusmi.MaxLineBytes).
const maxOutput = 4 << 20

// ErrNotFound is wrapped by errors for an npu-smi that is not there.
var ErrNotFound = errors.New("npu-smi not found")

// ErrNotExecutable is wrapped by errors for an npu-smi that is there but
// cannot be run: a file without execute permission, a directory.
var ErrNotExecutable = errors.New("not executable")

// Poller keeps the newest sample of a device table.
type Poller struct {
	source string
	every  time.Duration
	always bool
	// read returns a reading and the moment it is of (zero: when read
	// returned)
	read func(ctx context.Context) (*npusmi.Info, []npusmi.Usages, time.Time, error)

	mu   sync.Mutex
	last npusmi.Sample

	asked atomic.Int64 // unix nanos of the newest Latest call
	wake  chan struct{}
}

// New returns a poller running npu-smi as o says. Nothing runs before Run
// or Poll.
func New(o Options) *Poller {
	if o.Path == "" {
		o.Path = "npu-smi"
	}
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	p := &Poller{source: o.Path, every: o.Every, always: o.Always, wake: make(chan struct{}, 1)}
	p.read = func(ctx context.Context) (*npusmi.Info, []npusmi.Usages, time.Time, error) {
		// npu-smi reads the figures somewhere inside the call: the
		// reading's moment is taken as the call's middle
		start := time.Now()
		in, us, err := readNPUSMI(ctx, o)
		end := time.Now()
		return in, us, start.Add(end.Sub(start) / 2), err
	}
	return p
}

// NewFunc returns a poller whose samples come from fn, called every
// interval; source names it in the samples ("simulated").
func NewFunc(source string, every time.Duration, fn func() *npusmi.Info) *Poller {
	return NewFuncAt(source, every, func() (*npusmi.Info, time.Time) { return fn(), time.Time{} })
}

// NewFuncAt is NewFunc where fn also returns the moment its reading is of
// (a simulated device's own clock), which becomes the sample's At (zero:
// when fn returned). A view that sets the reading against other data of
// that clock (the devices view against the allocator's state) pairs them
// by it.
func NewFuncAt(source string, every time.Duration, fn func() (*npusmi.Info, time.Time)) *Poller {
	if every <= 0 {
		every = time.Second
	}
	p := &Poller{source: source, every: every, wake: make(chan struct{}, 1)}
	p.read = func(context.Context) (*npusmi.Info, []npusmi.Usages, time.Time, error) {
		in, at := fn()
		return in, nil, at, nil
	}
	return p
}

// Latest returns the newest sample at once; it also tells Run that
// samples are wanted.
func (p *Poller) Latest() npusmi.Sample {
	p.asked.Store(time.Now().UnixNano())
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return p.sample()
}

// sample returns the newest sample without telling Run it is wanted: Run's
// own polls must not keep the polling going.
func (p *Poller) sample() npusmi.Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.last
	s.Source, s.Every = p.source, p.every
	return s
}

// Poll reads the table once and records the sample.
func (p *Poller) Poll(ctx context.Context) npusmi.Sample {
	in, us, at, err := p.read(ctx)
	if at.IsZero() {
		at = time.Now()
	}
	p.mu.Lock()
	p.last.Seq++
	p.last.Err = err
	if err == nil {
		p.last.Info, p.last.Usages, p.last.At = in, us, at
	}
	p.mu.Unlock()
	return p.sample()
}

// Run polls every interval while samples are wanted, until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if !p.always && time.Since(time.Unix(0, p.asked.Load())) > 3*p.every {
			select { // nobody looked lately: sleep until someone does
			case <-ctx.Done():
				return
			case <-p.wake:
			}
		}
		p.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		t.Reset(p.every)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readNPUSMI runs `npu-smi info` and, with o.Usages, the usages of each NPU.
func readNPUSMI(ctx context.Context, o Options) (*npusmi.Info, []npusmi.Usages, error) {
	path, err := lookPath(o.Path)
	if err != nil {
		return nil, nil, err
	}
	out, err := run(ctx, o, path, "info")
	if err != nil {
		return nil, nil, err
	}
	in, err := npusmi.ParseInfo(out)
	if err != nil {
		return nil, nil, err
	}
	if !o.Usages {
		return in, nil, nil
	}
	var us []npusmi.Usages
	seen := map[int]bool{}
	for _, c := range in.Chips {
		if seen[c.NPU] {
			continue
		}
		seen[c.NPU] = true
		out, err := run(ctx, o, path, "info", "-t", "usages", "-i", strconv.Itoa(c.NPU))
		if err != nil {
			return nil, nil, err
		}
		u, err := npusmi.ParseUsages(out)
		if err != nil {
			return nil, nil, fmt.Errorf("NPU %d: %w", c.NPU, err)
		}
		for _, b := range u {
			if b.NPU != c.NPU {
				return nil, nil, fmt.Errorf("npu-smi info -t usages -i %d: the output is for NPU %d", c.NPU, b.NPU)
			}
		}
		us = append(us, u...)
	}
	return in, us, nil
}

// lookPath finds the npu-smi to run, telling a name that is not there
// (ErrNotFound; a bare name that is a file of the current directory, which
// PATH lookup does not search, says so) from a file that is there but
// cannot be run (ErrNotExecutable, naming it).
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		return path, nil
	}
	if !strings.ContainsRune(name, filepath.Separator) {
		if fi, serr := os.Stat(name); serr == nil && !fi.IsDir() {
			return "", fmt.Errorf("%w: %q is not on PATH (a file of that name is in the current directory: give ./%s)", ErrNotFound, name, name)
		}
		return "", fmt.Errorf("%w: %q is not on PATH", ErrNotFound, name)
	}
	fi, serr := os.Stat(name)
	switch {
	case serr == nil && fi.IsDir():
		return "", fmt.Errorf("npu-smi %s: %w: it is a directory", name, ErrNotExecutable)
	case serr == nil:
		return "", fmt.Errorf("npu-smi %s: %w (permission denied: mode %v)", name, ErrNotExecutable, fi.Mode().Perm())
	case errors.Is(serr, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %s: no such file", ErrNotFound, name)
	}
	return "", fmt.Errorf("npu-smi %s: %w", name, serr) // a directory on the way not searchable, …
}

// limitedBuffer keeps the first maxOutput bytes; on overflow it notes it
// and calls stop (which kills the tool), discarding the rest. The buffer
// is a field, not embedded: an embedded bytes.Buffer's ReadFrom would let
// io.Copy (how os/exec fills Stdout) bypass Write and read without bound.
type limitedBuffer struct {
	buf  bytes.Buffer
	over bool
	stop func()
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.buf.Len(); len(p) > room {
		if !b.over {
			b.over = true
			b.buf.Write(p[:max(room, 0)])
			b.stop()
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) String() string { return b.buf.String() }

func run(ctx context.Context, o Options, path string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	ctx, kill := context.WithCancel(ctx)
	defer kill()
	cmd := exec.CommandContext(ctx, path, args...)
	// The tool runs in its own process group, and the whole group is
	// killed on timeout or overflow: a hung npu-smi's children (a shell
	// script's subprocesses, a driver helper) must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdout, stderr := limitedBuffer{stop: kill}, limitedBuffer{stop: kill}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	name := "npu-smi " + strings.Join(args, " ")
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		// it never ran: not a program this host runs (a text file without
		// #!, another architecture's binary), or gone since the lookup
		return nil, fmt.Errorf("%s: cannot run %s: %v", name, path, pe.Err)
	case stdout.over || stderr.over:
		return nil, fmt.Errorf("%s: more than %d bytes of output", name, maxOutput)
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("%s: no answer within %v", name, o.Timeout)
	case err != nil:
		msg := firstLine(stderr.String())
		if msg == "" {
			msg = firstLine(stdout.String())
		}
		if msg != "" {
			return nil, fmt.Errorf("%s: %v: %s", name, err, msg)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return stdout.buf.Bytes(), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
