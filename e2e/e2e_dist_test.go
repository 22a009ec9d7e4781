//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// The TestDist tests check what `make dist` made: make test-dist runs it and
// points NPUMON_DIST at its output (docs/release.md). Without NPUMON_DIST
// they skip, so `make test-e2e` does not build the release.

// distArches are the architectures make dist builds, with the ELF machine
// each binary must be.
var distArches = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// distTarball is one unpacked release tarball.
type distTarball struct {
	path, name, version, arch, top string
	headers                        []*tar.Header
	files                          map[string][]byte // regular files by path below top
}

var distTarballName = regexp.MustCompile(`^npumon-(.+)-linux-([a-z0-9]+)\.tar\.gz$`)

// distDir is NPUMON_DIST, or a skip.
func distDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("NPUMON_DIST")
	if d == "" {
		t.Skip("NPUMON_DIST is not set: make test-dist builds the release and runs these tests")
	}
	return d
}

// repoRoot is the checkout the e2e tests run in.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("git rev-parse --show-toplevel: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// readDist reads every tarball in dir; it fails unless there is exactly one
// per architecture of distArches, all of one version.
func readDist(t *testing.T, dir string) []*distTarball {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "npumon-*.tar.gz"))
	var tbs []*distTarball
	arches := map[string]bool{}
	for _, p := range paths {
		m := distTarballName.FindStringSubmatch(filepath.Base(p))
		if m == nil {
			t.Fatalf("%s: not named npumon-<version>-linux-<arch>.tar.gz", p)
		}
		tb := &distTarball{path: p, name: filepath.Base(p), version: m[1], arch: m[2],
			top: strings.TrimSuffix(filepath.Base(p), ".tar.gz"), files: map[string][]byte{}}
		if _, ok := distArches[tb.arch]; !ok || arches[tb.arch] {
			t.Fatalf("%s: unexpected or second tarball for %s", p, tb.arch)
		}
		arches[tb.arch] = true
		if len(tbs) > 0 && tbs[0].version != tb.version {
			t.Fatalf("%s and %s: two versions", tbs[0].name, tb.name)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			tb.headers = append(tb.headers, h)
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatalf("%s: %s: %v", p, h.Name, err)
				}
				tb.files[strings.TrimPrefix(h.Name, tb.top+"/")] = b
			}
		}
		f.Close()
		tbs = append(tbs, tb)
	}
	if len(tbs) != len(distArches) {
		t.Fatalf("%s holds %d tarballs, want one for each of %d architectures", dir, len(tbs), len(distArches))
	}
	return tbs
}

// TestDistChecksums: SHA256SUMS names every tarball once, its hashes are the
// tarballs' and `sha256sum -c` agrees.
func TestDistChecksums(t *testing.T) {
	dir := distDir(t)
	tbs := readDist(t, dir)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("SHA256SUMS: line %q is not <sha256>  <name>", sc.Text())
		}
		if _, dup := listed[m[2]]; dup {
			t.Fatalf("SHA256SUMS names %s twice", m[2])
		}
		listed[m[2]] = m[1]
	}
	if len(listed) != len(tbs) {
		t.Fatalf("SHA256SUMS names %d files, dist holds %d tarballs", len(listed), len(tbs))
	}
	for _, tb := range tbs {
		b, err := os.ReadFile(tb.path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); listed[tb.name] != got {
			t.Errorf("SHA256SUMS says %s for %s, its sha256 is %s", listed[tb.name], tb.name, got)
		}
	}
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Log("sha256sum not installed: the hashes were checked here only")
		return
	}
	cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
}

// TestDistContents: each tarball holds one top directory named after it
// with exactly the binary, the completions and the tracked README, licence,
// docs and Python producer (byte for byte the checkout's, no caches), in
// sorted order, owned by 0:0 with fixed modes and the commit's time.
func TestDistContents(t *testing.T) {
	tbs := readDist(t, distDir(t))
	root := repoRoot(t)
	commitTime, err := strconv.ParseInt(strings.TrimSpace(gitOut(t, "log", "-1", "--format=%ct")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	tracked := strings.Fields(gitOut(t, "ls-files", "--", "README.md", "LICENSE*", "NOTICE*", "docs", "monitor/producer/python"))
	if !slices.Contains(tracked, "docs/cli.md") || !slices.Contains(tracked, "monitor/producer/python/npumon_producer/__init__.py") {
		t.Fatalf("git ls-files found no docs or producer: %v", tracked)
	}
	hasLicence := slices.ContainsFunc(tracked, func(f string) bool { return strings.HasPrefix(f, "LICENSE") })
	want := append([]string{"npumon", "completions/npumon.bash", "completions/_npumon", "completions/npumon.fish"}, tracked...)
	slices.Sort(want)

	for _, tb := range tbs {
		var got []string
		for i, h := range tb.headers {
			if h.Name != tb.top+"/" && !strings.HasPrefix(h.Name, tb.top+"/") {
				t.Errorf("%s: %s is outside the top directory %s/", tb.name, h.Name, tb.top)
			}
			if i == 0 && h.Name != tb.top+"/" {
				t.Errorf("%s: first entry %s, want the top directory", tb.name, h.Name)
			}
			if i > 0 && !pathBefore(tb.headers[i-1].Name, h.Name) {
				t.Errorf("%s: %s comes after %s: entries are not sorted", tb.name, h.Name, tb.headers[i-1].Name)
			}
			if h.Uid != 0 || h.Gid != 0 || (h.Uname != "" && h.Uname != "root") || (h.Gname != "" && h.Gname != "root") {
				t.Errorf("%s: %s owned by %d:%d (%s:%s), want 0:0", tb.name, h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
			}
			if h.ModTime.Unix() != commitTime {
				t.Errorf("%s: %s mtime %v, want the commit's %v", tb.name, h.Name, h.ModTime.UTC(), time.Unix(commitTime, 0).UTC())
			}
			rel := strings.TrimPrefix(h.Name, tb.top+"/")
			if regexp.MustCompile(`(^|/)(__pycache__|\.pytest_cache)(/|$)|\.py[co]$`).MatchString(rel) {
				t.Errorf("%s: carries the cache %s", tb.name, h.Name)
			}
			mode := int64(0o644)
			switch {
			case h.Typeflag == tar.TypeDir:
				mode = 0o755
			case h.Typeflag != tar.TypeReg:
				t.Errorf("%s: %s is neither a file nor a directory (type %q)", tb.name, h.Name, h.Typeflag)
			case rel == "npumon":
				mode = 0o755
			}
			if h.Mode&0o7777 != mode {
				t.Errorf("%s: %s mode %o, want %o", tb.name, h.Name, h.Mode&0o7777, mode)
			}
			if h.Typeflag == tar.TypeReg {
				got = append(got, rel)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds\n  %s\nwant\n  %s", tb.name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if _, ok := tb.files["LICENSE"]; ok != hasLicence {
			t.Errorf("%s: LICENSE in the tarball %v, in the repository %v", tb.name, ok, hasLicence)
		}
		for _, f := range tracked {
			b, err := os.ReadFile(filepath.Join(root, f))
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := tb.files[f]; ok && !bytes.Equal(c, b) {
				t.Errorf("%s: %s differs from the checkout's", tb.name, f)
			}
		}
		for f, marker := range map[string]string{
			"completions/npumon.bash": "complete -o default -F __start_npumon npumon",
			"completions/_npumon":     "#compdef npumon",
			"completions/npumon.fish": "complete -c npumon",
		} {
			if !strings.Contains(string(tb.files[f]), marker) {
				t.Errorf("%s: %s lacks %q", tb.name, f, marker)
			}
			if !bytes.Equal(tb.files[f], tbs[0].files[f]) {
				t.Errorf("%s and %s: %s differs", tb.name, tbs[0].name, f)
			}
		}
	}
}

// pathBefore orders paths as GNU tar's --sort=name walks them: directory by
// directory, each directory's names in byte order (so a/x before a.txt).
func pathBefore(a, b string) bool {
	return slices.Compare(strings.Split(strings.TrimSuffix(a, "/"), "/"), strings.Split(strings.TrimSuffix(b, "/"), "/")) < 0
}

// TestDistStatic: each binary is a 64-bit ELF executable of its architecture
// with no interpreter and no shared library, so it runs on a host with any
// libc or none.
func TestDistStatic(t *testing.T) {
	for _, tb := range readDist(t, distDir(t)) {
		f, err := elf.NewFile(bytes.NewReader(tb.files["npumon"]))
		if err != nil {
			t.Fatalf("%s: npumon: %v", tb.name, err)
		}
		if f.Machine != distArches[tb.arch] || f.Class != elf.ELFCLASS64 || f.Type != elf.ET_EXEC {
			t.Errorf("%s: npumon is %v %v %v, want %v ELFCLASS64 ET_EXEC", tb.name, f.Machine, f.Class, f.Type, distArches[tb.arch])
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: npumon has a %v program header: not static", tb.name, p.Type)
			}
		}
		needed, err := f.DynString(elf.DT_NEEDED)
		if err != nil {
			t.Errorf("%s: npumon: DT_NEEDED: %v", tb.name, err)
		}
		if len(needed) > 0 {
			t.Errorf("%s: npumon needs %v: not static", tb.name, needed)
		}
		f.Close()
	}
}

// TestDistRun unpacks each tarball and runs its binary — natively where the
// host has that architecture, the arm64 one under qemu-aarch64 otherwise
// (skipped with a note without it, unless REQUIRE_ARM64=1): `npumon version`
// names the version, the commit and the platform; `stats --json` of a
// torch_npu snapshot gives the same bytes on both; `demo --headless` runs
// the embedded job.
func TestDistRun(t *testing.T) {
	tbs := readDist(t, distDir(t))
	head := strings.TrimSpace(gitOut(t, "rev-parse", "HEAD"))
	snap := fixture.Path(t, "snapshots/npu-2.6-msinsight-snapshot_1768383987920985470.pkl")
	stats := map[string][]byte{}
	for _, tb := range tbs {
		t.Run(tb.arch, func(t *testing.T) {
			var runner []string
			if tb.arch != runtime.GOARCH {
				if tb.arch != "arm64" {
					t.Skipf("%s binary on a %s host: no emulator this test knows", tb.arch, runtime.GOARCH)
				}
				q, err := exec.LookPath("qemu-aarch64")
				if err != nil {
					if os.Getenv("REQUIRE_ARM64") == "1" {
						t.Fatal("qemu-aarch64 not found and REQUIRE_ARM64=1")
					}
					t.Skip("skipped: no qemu-aarch64 to run the arm64 binary (apt-get install qemu-user)")
				}
				runner = []string{q}
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "npumon"), tb.files["npumon"], 0o755); err != nil {
				t.Fatal(err)
			}
			npumon := func(args ...string) []byte {
				t.Helper()
				argv := append(append(append([]string{}, runner...), filepath.Join(dir, "npumon")), args...)
				cmd := exec.Command(argv[0], argv[1:]...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("%v: %v\n%s", argv, err, stderr.Bytes())
				}
				return out
			}

			lines := strings.Split(strings.TrimSuffix(string(npumon("version")), "\n"), "\n")
			if len(lines) != 3 || lines[0] != "npumon "+tb.version ||
				!strings.HasPrefix(lines[1], "commit "+head+" ") ||
				lines[2] != "built with "+runtime.Version()+" for linux/"+tb.arch {
				t.Errorf("npumon version printed\n%s\nwant npumon %s, commit %s …, built with %s for linux/%s",
					strings.Join(lines, "\n"), tb.version, head, runtime.Version(), tb.arch)
			}

			out := npumon("stats", "--json", snap)
			var s any
			if err := json.Unmarshal(out, &s); err != nil || !bytes.Contains(out, []byte(`"segments": 52,`)) {
				t.Errorf("stats --json of the torch_npu fixture (want 52 segments, %v):\n%.600s", err, out)
			}
			stats[tb.arch] = out

			out = npumon("demo", "--headless", "1s")
			var demo struct {
				Entries int64 `json:"entries"`
			}
			if err := json.Unmarshal(out, &demo); err != nil || demo.Entries == 0 {
				t.Errorf("demo --headless 1s: %v, %d entries:\n%.600s", err, demo.Entries, out)
			}
		})
	}
	if a, b := stats["amd64"], stats["arm64"]; a != nil && b != nil && !bytes.Equal(a, b) {
		t.Errorf("stats --json differs between amd64 and arm64:\n%s\n----\n%s", a, b)
	}
}

// TestDistReproducible: a second make dist of the same tree gives the same
// bytes (the same SHA256SUMS). The packages come from the build cache, so
// this costs two links.
func TestDistReproducible(t *testing.T) {
	dir := distDir(t)
	first, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	again := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "dist", "DIST="+again)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist DIST=%s: %v\n%s", again, err, out)
	}
	second, err := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Fatalf("two make dist runs differ:\n%s\n----\n%s", first, second)
	}
}
