package golden

import (
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Fatal ends only the goroutine Check runs in.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...); runtime.Goexit() }
func (r *recorder) Fatalf(f string, args ...any) {
	r.failed = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// check runs Check against a recorder and returns its failure ("" if none).
func check(t *testing.T, path string, got string) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Check(r, path, []byte(got))
	}()
	<-done
	return r.failed
}

func TestCheck(t *testing.T) {
	if Update() {
		t.Skip("compares, so not with -update")
	}
	path := filepath.Join(t.TempDir(), "x.golden")
	if err := os.WriteFile(path, []byte("a\nb\r\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f := check(t, path, "a\nb\nc\n"); f != "" {
		t.Errorf("equal output (CRLF in the file) failed: %s", f)
	}
	f := check(t, path, "a\nB\nc\n")
	if !strings.Contains(f, "line 2:") || !strings.Contains(f, `want "b"`) || !strings.Contains(f, `got  "B"`) || !strings.Contains(f, "-update") {
		t.Errorf("a changed line: failure %q", f)
	}
	if f := check(t, path, "a\nb\nc\nd\n"); !strings.Contains(f, "line 4:") || !strings.Contains(f, `got  "d"`) {
		t.Errorf("an added line: failure %q", f)
	}
	if f := check(t, filepath.Join(t.TempDir(), "none.golden"), "a"); !strings.Contains(f, "no such file") {
		t.Errorf("a missing golden: failure %q", f)
	}
	if Path(t) != filepath.Join("testdata", "TestCheck.golden") {
		t.Errorf("Path %q", Path(t))
	}
}

func TestUpdateIsOneBoolFlag(t *testing.T) {
	f := flag.Lookup("update")
	if f == nil {
		t.Fatal("no -update flag registered")
	}
	if _, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok {
		t.Fatalf("-update is not a bool flag: %T", f.Value)
	}
	if Update() != (f.Value.String() == "true") {
		t.Fatal("Update disagrees with the flag")
	}
}

// TestOneWayToRefresh: no test defines a golden flag of its own or calls
// x/exp/golden directly, and `make golden` refreshes every package whose
// tests use this one (and the Python-reference goldens).
func TestOneWayToRefresh(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GOLDEN_PKGS\s*:=(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no GOLDEN_PKGS")
	}
	listed := strings.Fields(string(m[1]))
	target := regexp.MustCompile(`(?m)^golden:\n((?:\t.*\n)+)`).FindSubmatch(mk)
	if target == nil || !strings.Contains(string(target[1]), "$(GOLDEN_PKGS)") || !strings.Contains(string(target[1]), "-update") ||
		!strings.Contains(string(target[1]), "regen_golden.sh") {
		t.Fatalf("Makefile: the golden target does not run $(GOLDEN_PKGS) with -update and regen_golden.sh:\n%s", target)
	}
	const self = "github.com/npumon/npumon/internal/testutil/golden"
	var users []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if filepath.Dir(rel) == filepath.Join("internal", "testutil", "golden") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(src), `flag.Bool("update"`) {
			t.Errorf("%s defines its own -update flag: use internal/testutil/golden", rel)
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			switch p {
			case "github.com/charmbracelet/x/exp/golden":
				t.Errorf("%s imports x/exp/golden: use internal/testutil/golden (golden.Check)", rel)
			case self:
				if pkg := "./" + filepath.ToSlash(filepath.Dir(rel)) + "/"; !slices.Contains(users, pkg) {
					users = append(users, pkg)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(users) == 0 {
		t.Fatal("no test uses the golden helper")
	}
	slices.Sort(users)
	slices.Sort(listed)
	if !slices.Equal(users, listed) {
		t.Errorf("Makefile GOLDEN_PKGS %v, want the packages whose tests use golden.Check: %v", listed, users)
	}
}
