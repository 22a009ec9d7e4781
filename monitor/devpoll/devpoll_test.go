package devpoll

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/monitor/npusmi"
)

const (
	x8   = "npu-smi/npu-smi-info-910B3x8-24.1.rc1.txt"
	a3   = "npu-smi/npu-smi-info-A3-2chip-25.2.0.txt"
	p310 = "npu-smi/npu-smi-info-310P3-24.1.0.1-procs.txt"
)

func TestPollStandIn(t *testing.T) {
	dir := fixture.NPUSMIStandIn(t, x8)
	p := New(Options{Path: filepath.Join(dir, "npu-smi")})
	s := p.Poll(context.Background())
	if s.Err != nil || s.Seq != 1 || s.Info == nil || len(s.Info.Chips) != 8 || s.Info.Chips[7].HBMUsedMB != 3315 {
		t.Fatalf("first poll: %+v", s)
	}
	fixture.SetNPUSMIOutput(t, dir, a3)
	s = p.Poll(context.Background())
	if s.Err != nil || s.Seq != 2 || len(s.Info.Chips) != 4 || s.Info.Chips[3].HBMUsedMB != 10568 || len(s.Info.Procs) != 1 {
		t.Fatalf("second poll: %+v", s)
	}
	if s.Source != filepath.Join(dir, "npu-smi") || s.Every != time.Second {
		t.Errorf("source %q every %v", s.Source, s.Every)
	}
	// a failing call keeps the last table and reports the error
	fixture.SetNPUSMIOutput(t, dir, "text:dcmi module initialize failed. ret is -8005\n")
	s = p.Poll(context.Background())
	if s.Err == nil || !strings.Contains(s.Err.Error(), "line 1: not an npu-smi info table") || len(s.Info.Chips) != 4 {
		t.Fatalf("bad output: %+v", s)
	}
	if err := os.WriteFile(filepath.Join(dir, "fail"), []byte("dcmi module initialize failed. ret is -8005\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = p.Poll(context.Background())
	if s.Err == nil || s.Err.Error() != "npu-smi info: exit status 3: dcmi module initialize failed. ret is -8005" {
		t.Fatalf("failing tool: %v", s.Err)
	}
}

func TestPollFindsNPUSMIOnPath(t *testing.T) {
	dir := fixture.NPUSMIStandIn(t, p310)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	s := New(Options{}).Poll(context.Background())
	if s.Err != nil || len(s.Info.Procs) != 4 || s.Source != "npu-smi" {
		t.Fatalf("%+v", s)
	}
}

func TestPollNotFound(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	s := New(Options{}).Poll(context.Background())
	if !errors.Is(s.Err, ErrNotFound) || s.Info != nil {
		t.Fatalf("%+v", s)
	}
	s = New(Options{Path: "/nonexistent/npu-smi"}).Poll(context.Background())
	if !errors.Is(s.Err, ErrNotFound) {
		t.Fatalf("%+v", s)
	}
}

func TestPollUsages(t *testing.T) {
	dir := fixture.NPUSMIStandIn(t, a3)
	p := New(Options{Path: filepath.Join(dir, "npu-smi"), Usages: true})
	// the recorded usages are NPU 0's: NPU 1 must not take them for its own
	s := p.Poll(context.Background())
	if s.Err == nil || s.Err.Error() != "npu-smi info -t usages -i 1: the output is for NPU 0" || s.Info != nil {
		t.Fatalf("NPU 0's usages for NPU 1: %+v", s)
	}
	u, _ := os.ReadFile(filepath.Join(dir, "usages.txt"))
	u1 := strings.Replace(strings.Replace(string(u), "NPU ID                         : 0", "NPU ID                         : 1", 1),
		"HBM Usage Rate(%)              : 5", "HBM Usage Rate(%)              : 16", 1)
	if err := os.WriteFile(filepath.Join(dir, "usages-1.txt"), []byte(u1), 0o644); err != nil {
		t.Fatal(err)
	}
	s = p.Poll(context.Background())
	if s.Err != nil || len(s.Usages) != 2 || s.Usages[0].Pct["HBM Usage Rate"] != 5 || s.Usages[1].NPU != 1 || s.Usages[1].Pct["HBM Usage Rate"] != 16 {
		t.Fatalf("%+v", s)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	if want := "info\ninfo -t usages -i 0\ninfo -t usages -i 1\n"; string(log) != want+want {
		t.Errorf("calls:\n%s", log)
	}
}

func TestPollTimeout(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "npu-smi")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Path: script, Timeout: 100 * time.Millisecond}).Poll(context.Background())
	if s.Err == nil || !strings.Contains(s.Err.Error(), "no answer within 100ms") {
		t.Fatalf("%v", s.Err)
	}
}

// TestRunPollsOnDemand: a poller nobody reads from runs no npu-smi; the
// first Latest starts the polling.
func TestRunPollsOnDemand(t *testing.T) {
	dir := fixture.NPUSMIStandIn(t, x8)
	p := New(Options{Path: filepath.Join(dir, "npu-smi"), Every: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// an absence can only be watched for a while: a slow machine that has
	// not started Run by then lets this pass without proving much, never fail
	time.Sleep(100 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "calls.log")); err == nil {
		t.Fatal("npu-smi ran before anyone asked")
	}
	if s := p.Latest(); s.Seq != 0 || s.Info != nil {
		t.Fatalf("sample before a poll: %+v", s)
	}
	poll.Until(t, "polls after Latest", func() bool { return p.Latest().Seq >= 3 })
}

// TestRunStopsWhenNobodyAsks: once Latest is no longer called, Run stops
// polling (a view that is not shown costs no npu-smi calls), whatever it
// polled before.
func TestRunStopsWhenNobodyAsks(t *testing.T) {
	var calls atomic.Int64
	p := NewFunc("counted", 10*time.Millisecond, func() *npusmi.Info { calls.Add(1); return &npusmi.Info{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	poll.Until(t, "polls after Latest", func() bool { return p.Latest().Seq >= 3 })
	// nobody asks from here on: within three intervals (and a poll that
	// may be under way) Run goes to sleep. A window of 50 intervals without
	// a call shows it; polling every interval never gives one.
	poll.Within(t, time.Minute, "a quiet window of 50 intervals", func() bool {
		before := calls.Load()
		time.Sleep(500 * time.Millisecond)
		return calls.Load() == before
	})
}

func TestNewFunc(t *testing.T) {
	n := 0
	p := NewFunc("simulated", time.Second, func() *npusmi.Info {
		n++
		return &npusmi.Info{Chips: []npusmi.Chip{{NPU: n}}}
	})
	p.Poll(context.Background())
	s := p.Poll(context.Background())
	if s.Seq != 2 || s.Info.Chips[0].NPU != 2 || s.Source != "simulated" {
		t.Fatalf("%+v", s)
	}
}

// TestNewFuncAt: the sample's At is the moment the function says its
// reading is of (a simulated device's clock), not when the poll ran.
func TestNewFuncAt(t *testing.T) {
	sim := time.Date(2025, 11, 29, 7, 6, 40, 1500, time.UTC)
	p := NewFuncAt("simulated", time.Second, func() (*npusmi.Info, time.Time) {
		return &npusmi.Info{Chips: []npusmi.Chip{{NPU: 0}}}, sim
	})
	if s := p.Poll(context.Background()); !s.At.Equal(sim) {
		t.Fatalf("At %v, want %v", s.At, sim)
	}
	before := time.Now()
	q := NewFunc("simulated", time.Second, func() *npusmi.Info { return &npusmi.Info{} })
	if s := q.Poll(context.Background()); s.At.Before(before) {
		t.Fatalf("NewFunc's At %v is before the poll", s.At)
	}
}

// hostileTool writes an executable shell script as npu-smi.
func hostileTool(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "npu-smi")
	if err := os.WriteFile(p, []byte("#!/bin/sh\nPATH=/usr/bin:/bin\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A tool printing without end is killed as soon as it passes maxOutput,
// not left running (and read) until the timeout.
func TestPollEndlessOutputKilledEarly(t *testing.T) {
	p := New(Options{Path: hostileTool(t, "exec yes '| 910B3 | OK | 0 0 |'\n"), Timeout: time.Minute})
	start := time.Now()
	s := p.Poll(context.Background())
	if s.Err == nil || !strings.Contains(s.Err.Error(), "npu-smi info: more than 4194304 bytes of output") {
		t.Fatalf("endless output: %v", s.Err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v: the tool ran until the timeout", d)
	}
}

// One line longer than the parser's line bound is refused by name.
func TestPollLongLine(t *testing.T) {
	p := New(Options{Path: hostileTool(t, "head -c 200000 /dev/zero | tr '\\0' x\necho\n")})
	s := p.Poll(context.Background())
	if s.Err == nil || !strings.Contains(s.Err.Error(), "line 1: a line over 65536 bytes") {
		t.Fatalf("long line: %v", s.Err)
	}
}

// A hung tool is killed with its whole process group: a child it started
// (here a sleep holding the output pipe) does not outlive the timeout.
func TestPollTimeoutKillsChildren(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	tool := hostileTool(t, "sleep 300 &\necho $! >"+pidFile+"\nwait\n")
	p := New(Options{Path: tool, Timeout: 500 * time.Millisecond})
	s := p.Poll(context.Background())
	if s.Err == nil || !strings.Contains(s.Err.Error(), "no answer within 500ms") {
		t.Fatalf("hung tool: %v", s.Err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		// a killed child may linger as a zombie of init for a moment
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the hung tool's child %d still runs after the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPollNotExecutable: a file that is there but cannot be run is not
// "not found": a file without execute permission or a directory says it is
// not executable, naming it; a bare name that is a file of the current
// directory says to give ./NAME; a text file with the execute bit but no #!
// says it cannot be run.
func TestPollNotExecutable(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "textfile")
	if err := os.WriteFile(text, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Options{Path: text}).Poll(context.Background())
	if errors.Is(s.Err, ErrNotFound) || !errors.Is(s.Err, ErrNotExecutable) || !strings.Contains(s.Err.Error(), text) ||
		!strings.Contains(s.Err.Error(), "permission denied") || strings.Contains(s.Err.Error(), "not found") {
		t.Errorf("a file without execute permission: %v", s.Err)
	}
	s = New(Options{Path: dir}).Poll(context.Background())
	if errors.Is(s.Err, ErrNotFound) || !errors.Is(s.Err, ErrNotExecutable) || !strings.Contains(s.Err.Error(), "directory") {
		t.Errorf("a directory: %v", s.Err)
	}
	t.Chdir(dir)
	s = New(Options{Path: "textfile"}).Poll(context.Background())
	if !errors.Is(s.Err, ErrNotFound) || !strings.Contains(s.Err.Error(), "./textfile") {
		t.Errorf("a bare name of a file here: %v", s.Err)
	}
	if err := os.Chmod(text, 0o755); err != nil {
		t.Fatal(err)
	}
	s = New(Options{Path: text}).Poll(context.Background())
	if s.Err == nil || errors.Is(s.Err, ErrNotFound) || errors.Is(s.Err, ErrNotExecutable) ||
		!strings.Contains(s.Err.Error(), "cannot run "+text) {
		t.Errorf("a text file with the execute bit: %v", s.Err)
	}
}
