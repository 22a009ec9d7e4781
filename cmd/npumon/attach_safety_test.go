package main

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/npumon/npumon/monitor/wire"
)

// trickler accepts connections and sends the start of a 16 MiB frame one
// byte at a time, never finishing it: a handshake that never completes.
func trickler(t *testing.T, path string) (accepted chan struct{}) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	accepted = make(chan struct{}, 16)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			go func() {
				defer c.Close()
				var hdr [5]byte
				binary.LittleEndian.PutUint32(hdr[:], wire.MaxFrame)
				hdr[4] = 1
				c.Write(hdr[:])
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
						if _, err := c.Write([]byte{'N'}); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return accepted
}

// A headless deadline ends a run stuck in a handshake, with exit 1.
func TestAttachHeadlessDeadlineDuringHandshake(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "slow.sock")
	trickler(t, sock)
	start := time.Now()
	code, _, errOut := captureRun(t, "attach", "unix:"+sock, "--headless", "500ms")
	if d := time.Since(start); d > 30*time.Second { // a hang detector: the run takes ~0.5 s
		t.Fatalf("headless 500ms took %v", d)
	}
	if code != exitFail || !strings.Contains(errOut, "never connected") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// SIGINT during a handshake that never completes ends attach.
func TestAttachInterruptDuringHandshake(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "slow.sock")
	accepted := trickler(t, sock)
	done := make(chan int, 1)
	go func() {
		code, _, _ := captureRun(t, "attach", "unix:"+sock, "--headless", "1h")
		done <- code
	}()
	select {
	case <-accepted: // attach is connected, so its signal handler is in place
	case <-time.After(time.Minute):
		t.Fatal("attach never connected")
	}
	// the trickler never completes the handshake: from here on, whenever
	// the signal lands, it lands during the handshake
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("attach ignored SIGINT during the handshake")
	}
}

// attach PID refuses a socket directory another user could have planted,
// and a socket served by another process than PID.
func TestAttachByPIDChecks(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv("TMPDIR", base)
	dir := wire.DefaultSocketDir()
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	code, _, errOut := captureRun(t, "attach", "4242", "--headless", "1s")
	if code == 0 || !strings.Contains(errOut, "mode 0777") {
		t.Fatalf("planted 0777 directory: exit %d, stderr %q", code, errOut)
	}
	os.Chmod(dir, 0o700)
	// a socket for pid 4242 that this process serves: the peer check refuses it
	pid := 4242
	if pid == os.Getpid() {
		pid++
	}
	ln, err := net.Listen("unix", wire.DefaultSocketPath(pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	start := time.Now()
	code, _, errOut = captureRun(t, "attach", strconv.Itoa(pid), "--headless", "5m")
	if code != exitFail || !strings.Contains(errOut, "served by pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("impostor socket: exit %d, stderr %q", code, errOut)
	}
	if d := time.Since(start); d > 30*time.Second { // a hang detector, not a timing bound
		t.Fatalf("a refused peer still ran the whole headless time (%v)", d)
	}
}

// sim --listen unix:PATH never deletes what is at PATH unless it is a
// stale socket.
func TestSimListenKeepsFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.txt")
	os.WriteFile(file, []byte("keep me"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	for _, p := range []string{file, empty} {
		code, _, errOut := captureRun(t, "sim", "--listen", "unix:"+p, "--steps", "1")
		if code == 0 || !strings.Contains(errOut, "not a socket") {
			t.Errorf("%s: exit %d, stderr %q", p, code, errOut)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Fatal("sim --listen replaced a regular file")
	}
	if fi, err := os.Stat(empty); err != nil || !fi.IsDir() {
		t.Fatal("sim --listen removed a directory")
	}
}
