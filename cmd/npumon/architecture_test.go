package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestArchitectureNamesFiles: every file and package directory that
// docs/architecture.md names in backquotes exists, so the package map and
// the "where a concept is defined" table follow the code when it moves.
func TestArchitectureNamesFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	path := regexp.MustCompile("`((?:acl|allocator|replay|profiler|monitor|tui|cmd|testdata|e2e|internal)(?:/[A-Za-z0-9_.]+)*/?)`")
	n := 0
	for _, m := range path.FindAllStringSubmatch(string(b), -1) {
		n++
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf("docs/architecture.md names %s: %v", m[1], err)
		}
	}
	if n < 60 {
		t.Errorf("found only %d paths in docs/architecture.md; the pattern no longer matches them", n)
	}
}
