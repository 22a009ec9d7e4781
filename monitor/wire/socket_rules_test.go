package wire

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The socket rules as cases in testdata/socket_rules.json, which the
// Python producer's tests (monitor/producer/python/tests/test_socket_rules.py)
// read too: both implementations resolve the same addresses and accept or
// refuse the same directories and paths with the same messages.

type socketRules struct {
	DefaultSocketPath []struct {
		Env  map[string]*string `json:"env"`
		PID  int                `json:"pid"`
		Want string             `json:"want"`
	} `json:"default_socket_path"`
	AddressesEnv map[string]*string `json:"addresses_env"`
	Addresses    []struct {
		In      string `json:"in"`
		PID     int    `json:"pid"`
		Network string `json:"network"`
		Address string `json:"address"`
		Listen  string `json:"listen"`
		Error   string `json:"error"`
	} `json:"addresses"`
	SocketDir []struct {
		Name          string `json:"name"`
		Make          string `json:"make"`
		Mode          string `json:"mode"`
		Owner         int    `json:"owner"`
		Create        bool   `json:"create"`
		NeedsRoot     bool   `json:"needs_root"`
		ModeAfter     string `json:"mode_after"`
		Error         string `json:"error"`
		ErrorContains string `json:"error_contains"`
	} `json:"socket_dir"`
	SocketPath []struct {
		Name       string `json:"name"`
		DefaultDir bool   `json:"default_dir"`
		Dir        string `json:"dir"`
		At         string `json:"at"`
		Left       *bool  `json:"left"`
		ModeAfter  string `json:"mode_after"`
		Error      string `json:"error"`
	} `json:"socket_path"`
}

func loadSocketRules(t *testing.T) socketRules {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "socket_rules.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r socketRules
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("testdata/socket_rules.json: %v", err)
	}
	if len(r.DefaultSocketPath) == 0 || len(r.Addresses) == 0 || len(r.SocketDir) == 0 || len(r.SocketPath) == 0 {
		t.Fatal("testdata/socket_rules.json: a section is empty")
	}
	return r
}

func setEnv(t *testing.T, env map[string]*string) {
	for k, v := range env {
		t.Setenv(k, "") // restored after the test
		if v == nil {
			os.Unsetenv(k)
		} else {
			os.Setenv(k, *v)
		}
	}
}

func fill(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

func chmodOctal(t *testing.T, path, mode string) {
	t.Helper()
	m, err := strconv.ParseUint(mode, 8, 32)
	if err != nil {
		t.Fatalf("mode %q: %v", mode, err)
	}
	// syscall, not os.Chmod: os.FileMode has its own bits for sticky and set-id
	if err := syscall.Chmod(path, uint32(m)); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return "0" + strconv.FormatUint(uint64(st.Mode&0o7777), 8)
}

// makeAt puts what a case names at path: a file, a directory, a symlink, a
// fifo, or a Unix socket (live: listening until the test ends; stale: its
// listener closed, the file left).
func makeAt(t *testing.T, path, what string) {
	t.Helper()
	var err error
	switch what {
	case "none", "missing", "missing_parent":
	case "file":
		err = os.WriteFile(path, []byte("keep me"), 0o600)
	case "dir":
		err = os.Mkdir(path, 0o700)
	case "symlink":
		target := path + ".target"
		if err = os.Mkdir(target, 0o700); err == nil {
			err = os.Symlink(target, path)
		}
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "socket", "live", "stale":
		var ln net.Listener
		ln, err = net.Listen("unix", path)
		if err == nil {
			ln.(*net.UnixListener).SetUnlinkOnClose(false)
			if what == "live" {
				t.Cleanup(func() { ln.Close() })
			} else {
				ln.Close()
			}
		}
	default:
		t.Fatalf("testdata/socket_rules.json: unknown kind %q", what)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func checkErr(t *testing.T, err error, want, contains string, vars map[string]string) {
	t.Helper()
	switch {
	case want != "":
		if err == nil || err.Error() != fill(want, vars) {
			t.Fatalf("error %v\nwant %s", err, fill(want, vars))
		}
	case contains != "":
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), contains) {
			t.Fatalf("error %v, want one containing %q", err, contains)
		}
	case err != nil:
		t.Fatalf("refused: %v", err)
	}
}

func TestSocketRules(t *testing.T) {
	rules := loadSocketRules(t)
	uid := strconv.Itoa(os.Getuid())

	t.Run("default_socket_path", func(t *testing.T) {
		for _, c := range rules.DefaultSocketPath {
			setEnv(t, c.Env)
			want := fill(c.Want, map[string]string{"uid": uid})
			if got := DefaultSocketPath(c.PID); got != want {
				t.Errorf("env %v: DefaultSocketPath(%d) = %s, want %s", c.Env, c.PID, got, want)
			}
		}
	})

	t.Run("addresses", func(t *testing.T) {
		setEnv(t, rules.AddressesEnv)
		for _, c := range rules.Addresses {
			pid := c.PID
			if pid == 0 {
				pid = -1
			}
			a, err := ResolveAddr(c.In, pid)
			if c.Error != "" {
				if err == nil || err.Error() != c.Error {
					t.Errorf("ResolveAddr(%q) = %v, %v; want the error %s", c.In, a, err, c.Error)
				}
				continue
			}
			if err != nil || a.Network != c.Network || a.Address != c.Address {
				t.Errorf("ResolveAddr(%q) = %v, %v; want %s:%s", c.In, a, err, c.Network, c.Address)
				continue
			}
			listen := a.Address
			if a.Network == "tcp" {
				listen = listenTCPAddress(a.Address)
			}
			if listen != c.Listen {
				t.Errorf("%q listens on %s, want %s", c.In, listen, c.Listen)
			}
		}
	})

	t.Run("socket_dir", func(t *testing.T) {
		for _, c := range rules.SocketDir {
			t.Run(c.Name, func(t *testing.T) {
				if c.NeedsRoot && os.Getuid() != 0 {
					t.Skip("needs root (chown)")
				}
				tmp := t.TempDir()
				dir := filepath.Join(tmp, "d")
				if c.Make == "missing_parent" {
					dir = filepath.Join(tmp, "no", "d")
				}
				makeAt(t, dir, c.Make)
				if c.Mode != "" {
					chmodOctal(t, dir, c.Mode)
				}
				if c.Owner != 0 {
					if err := os.Chown(dir, c.Owner, c.Owner); err != nil {
						t.Fatal(err)
					}
				}
				err := CheckSocketDir(dir, c.Create)
				checkErr(t, err, c.Error, c.ErrorContains, map[string]string{"uid": uid, "tmp": tmp, "dir": dir})
				if c.ModeAfter != "" {
					if m := modeOf(t, dir); m != c.ModeAfter {
						t.Errorf("mode %s after, want %s", m, c.ModeAfter)
					}
				}
			})
		}
	})

	t.Run("socket_path", func(t *testing.T) {
		for _, c := range rules.SocketPath {
			t.Run(c.Name, func(t *testing.T) {
				tmp := t.TempDir()
				xdg := filepath.Join(tmp, "xdg")
				if err := os.Mkdir(xdg, 0o700); err != nil {
					t.Fatal(err)
				}
				t.Setenv("XDG_RUNTIME_DIR", xdg)
				dir := filepath.Join(xdg, "npumon")
				if !c.DefaultDir {
					dir = filepath.Join(tmp, "elsewhere", "sub")
					if c.Dir != "missing" {
						if err := os.Mkdir(filepath.Dir(dir), 0o700); err != nil {
							t.Fatal(err)
						}
					}
				}
				switch c.Dir {
				case "missing", "symlink":
					makeAt(t, dir, c.Dir)
				default:
					makeAt(t, dir, "dir")
					chmodOctal(t, dir, c.Dir)
				}
				path := filepath.Join(dir, "1.sock")
				makeAt(t, path, c.At)
				err := prepareSocketPath(path)
				checkErr(t, err, c.Error, "", map[string]string{"uid": uid, "tmp": tmp, "dir": dir, "path": path})
				if c.Left != nil {
					_, serr := os.Lstat(path)
					if left := !errors.Is(serr, os.ErrNotExist); left != *c.Left {
						t.Errorf("something left at the path: %v, want %v", left, *c.Left)
					}
				}
				if c.ModeAfter != "" {
					if m := modeOf(t, dir); m != c.ModeAfter {
						t.Errorf("directory mode %s after, want %s", m, c.ModeAfter)
					}
				}
			})
		}
	})
}
