// Package layering holds the repository-wide test of which room may import
// which (docs/architecture.md, "Import direction"). It has no code of its
// own: the rules are data, read against every package's imports.
package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/npumon/npumon/"

// room names the room of a package (a path relative to the module root).
// The most specific prefix wins.
func room(pkg string) string {
	for _, r := range []struct{ prefix, room string }{
		{"internal/testutil", "testutil"},
		{"internal", "leaf"},
		{"allocator/snapshot", "leaf"},
		{"allocator/bytesize", "leaf"},
		{"allocator/config", "config"},
		{"acl", "acl"},
		{"allocator", "allocator"},
		{"profiler", "profiler"},
		{"replay/whatif/sim", "simulation"},
		{"replay", "replay"},
		{"monitor", "monitor"},
		{"tui", "tui"},
		{"cmd", "cmd"},
		{"e2e", "e2e"},
	} {
		if pkg == r.prefix || strings.HasPrefix(pkg, r.prefix+"/") {
			return r.room
		}
	}
	return "?"
}

// mayImport is the table: the rooms a room's non-test code may import
// besides itself. Leaves import nothing of npumon's but other leaves.
var mayImport = map[string][]string{
	"leaf":       {},
	"config":     {"leaf"},
	"acl":        {"leaf"},
	"allocator":  {"leaf", "config", "acl"},
	"profiler":   {"leaf"},
	"replay":     {"leaf", "config"},
	"simulation": {"leaf", "config", "acl", "allocator", "replay"},
	"monitor":    {"leaf", "config", "acl", "allocator", "profiler", "replay", "simulation"},
	"tui":        {"leaf", "config", "replay", "monitor"},
	"cmd":        {"leaf", "config", "acl", "allocator", "profiler", "replay", "simulation", "monitor", "tui"},
	"testutil":   {"leaf", "config", "acl", "allocator", "profiler", "replay", "simulation", "monitor", "tui"},
	"e2e":        {},
}

// Narrower rules inside rooms: a package (or a package prefix) that must
// not import another one, directly.
var forbidden = []struct{ from, to, why string }{
	{"monitor/store", "replay/explain", "the Store is the data hub: it imports no analysis"},
	{"monitor/store", "replay/whatif", "the Store is the data hub: it imports no analysis"},
	{"monitor/store", "monitor/", "the Store is below every other monitor package"},
	{"tui/", "tui", "a tui subpackage is a component the root model uses; it does not import its parent"},
}

// tuiMustNotLink is what the terminal UI's import closure must not hold:
// the allocator algorithm (and the simulated runtime under it), the
// profiler's readers (SQLite), the watcher (fsnotify) and the simulation.
// What needs them is handed in by cmd/npumon through tui.Options.
var tuiMustNotLink = []string{"acl", "allocator", "profiler", "monitor/watch", "monitor/align",
	"replay/whatif/sim", "modernc.org/sqlite", "github.com/fsnotify/fsnotify"}

type graph struct {
	imports     map[string][]string // package → npumon packages its non-test code imports
	external    map[string][]string // package → other modules' packages
	testImports map[string][]string // package → npumon packages only its tests import
}

type violation struct{ from, to, why string }

func (v violation) String() string { return v.from + " imports " + v.to + ": " + v.why }

// check returns every import of g that the rules forbid.
func check(g graph) []violation {
	var out []violation
	for from, tos := range g.imports {
		fr := room(from)
		for _, to := range tos {
			tr := room(to)
			if tr == "testutil" && fr != "testutil" {
				out = append(out, violation{from, to, "test helpers are imported by tests only"})
				continue
			}
			if tr != fr && !slices.Contains(mayImport[fr], tr) {
				out = append(out, violation{from, to, "room " + fr + " may not import room " + tr})
			}
			for _, f := range forbidden {
				if matches(from, f.from) && matches(to, f.to) && from != to && !(f.to == "monitor/" && room(to) != "monitor") {
					out = append(out, violation{from, to, f.why})
				}
			}
		}
	}
	for pkg := range g.imports {
		if pkg != "tui" && !strings.HasPrefix(pkg, "tui/") {
			continue
		}
		for _, dep := range closure(g, pkg) {
			for _, bad := range tuiMustNotLink {
				if dep == bad || strings.HasPrefix(dep, bad+"/") && bad != "allocator" {
					out = append(out, violation{pkg, dep, "the terminal UI does not link " + bad + " (cmd/npumon hands such work in through tui.Options)"})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b violation) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// matches: rule "p/" matches the packages under p; "p" matches p itself.
func matches(pkg, rule string) bool {
	if strings.HasSuffix(rule, "/") {
		return strings.HasPrefix(pkg, rule)
	}
	return pkg == rule
}

// closure is every package pkg links (npumon's and others'), pkg excluded.
func closure(g graph, pkg string) []string {
	seen := map[string]bool{pkg: true}
	var out []string
	stack := []string{pkg}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range g.external[p] {
			if !seen[e] {
				seen[e] = true
				out = append(out, e)
			}
		}
		for _, d := range g.imports[p] {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
				stack = append(stack, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// readGraph parses the imports of every Go file under root.
func readGraph(t *testing.T, root string) graph {
	g := graph{imports: map[string][]string{}, external: map[string][]string{}, testImports: map[string][]string{}}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		test := strings.HasSuffix(path, "_test.go")
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			switch {
			case strings.HasPrefix(p, module):
				p = strings.TrimPrefix(p, module)
				if test {
					add(g.testImports, pkg, p)
				} else {
					add(g.imports, pkg, p)
				}
			case !test && strings.Contains(strings.SplitN(p, "/", 2)[0], "."):
				add(g.external, pkg, p)
			}
		}
		if _, ok := g.imports[pkg]; !ok && !test {
			g.imports[pkg] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func add(m map[string][]string, k, v string) {
	if !slices.Contains(m[k], v) {
		m[k] = append(m[k], v)
	}
}

// TestLayering: no package of the repository breaks the table.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	g := readGraph(t, root)
	if len(g.imports) < 30 || len(g.imports["tui"]) == 0 {
		t.Fatalf("read %d packages (tui imports %v): is the walk reading the module?", len(g.imports), g.imports["tui"])
	}
	for pkg := range g.imports {
		if room(pkg) == "?" {
			t.Errorf("package %s is in no room: add it to room()", pkg)
		}
	}
	for _, v := range check(g) {
		t.Error(v)
	}
	if !slices.Contains(closure(g, "tui"), "allocator/snapshot") {
		t.Error("the TUI's closure lacks allocator/snapshot: is the graph right?")
	}
}

// TestLayeringCatches: each kind of forbidden import is reported.
func TestLayeringCatches(t *testing.T) {
	g := graph{imports: map[string][]string{
		"profiler":               {"replay"},    // sibling rooms
		"replay":                 {"allocator"}, // the algorithm
		"monitor/store":          {"replay/explain", "monitor/watch"},
		"monitor/watch":          {"monitor/store"},
		"tui/segmap":             {"tui"}, // a component importing its parent
		"tui":                    {"replay/explain", "tui/segmap"},
		"replay/explain":         {"replay/whatif"},
		"replay/whatif":          {},
		"allocator":              {"acl"},
		"acl":                    {},
		"internal/crash":         {"internal/testutil/poll"}, // a test helper in code
		"internal/testutil/poll": {},
		"monitor/metrics":        {"profiler"},
		"profiler/x":             {"allocator/snapshot"},
	}, external: map[string][]string{"monitor/metrics": {"modernc.org/sqlite"}}}
	g.imports["tui"] = append(g.imports["tui"], "monitor/metrics") // links SQLite through metrics → profiler
	got := map[string]bool{}
	for _, v := range check(g) {
		got[v.from+" → "+v.to] = true
	}
	for _, want := range []string{
		"profiler → replay", "replay → allocator", "monitor/store → replay/explain", "monitor/store → monitor/watch",
		"tui/segmap → tui", "internal/crash → internal/testutil/poll", "tui → profiler", "tui → modernc.org/sqlite",
	} {
		if !got[want] {
			t.Errorf("not reported: %s (got %v)", want, got)
		}
	}
	for _, ok := range []string{"monitor/watch → monitor/store", "tui → tui/segmap", "allocator → acl", "profiler/x → allocator/snapshot", "replay/explain → replay/whatif"} {
		if got[ok] {
			t.Errorf("reported an allowed import: %s", ok)
		}
	}
}
