package explain

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/replay"
)

// source finds a golden's snapshot: a generated file in replay/testdata or
// a real fixture.
func source(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("..", "testdata", name)
	if _, err := os.Stat(src); err != nil {
		src = fixture.Path(t, "snapshots/"+name)
	}
	return src
}

func decode(t *testing.T, path string) *replay.Capture {
	t.Helper()
	c, err := replay.DecodeFile(path, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func readGolden(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func compare(t *testing.T, got any, want map[string]any) {
	t.Helper()
	g := asMap(t, got)
	if !reflect.DeepEqual(g, want) {
		gj, _ := json.MarshalIndent(g, "", "  ")
		wj, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("differs from the Python reference (testdata/ref_explain.py)\n got: %s\nwant: %s", gj, wj)
	}
}

// TestHoldersGolden compares holders at the end and at the peak, by call
// site, with the goldens ref_explain.py wrote for every real fixture and
// generated variant.
func TestHoldersGolden(t *testing.T) {
	goldens, _ := filepath.Glob("../testdata/golden/*.holders-*.json")
	if len(goldens) < 26 {
		t.Fatalf("only %d holders goldens; run testdata/regen_golden.sh", len(goldens))
	}
	for _, g := range goldens {
		base := filepath.Base(g)
		i := strings.LastIndex(base, ".holders-")
		name, at := base[:i], strings.TrimSuffix(base[i+len(".holders-"):], ".json")
		t.Run(base, func(t *testing.T) {
			d, err := NewDevice(decode(t, source(t, name)), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := d.Holders(at, d.Grouper(ByCallsite), 0)
			if err != nil {
				t.Fatal(err)
			}
			h.Path = ""
			compare(t, h, readGolden(t, g))
		})
	}
}

// TestExplainGolden compares explain (without the what-if, which
// replay/whatif's tests cover) with the reference's.
func TestExplainGolden(t *testing.T) {
	goldens, _ := filepath.Glob("../testdata/golden/*.explain.json")
	if len(goldens) < 13 {
		t.Fatalf("only %d explain goldens; run testdata/regen_golden.sh", len(goldens))
	}
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".explain.json")
		t.Run(name, func(t *testing.T) {
			e, err := Explain(context.Background(), decode(t, source(t, name)), Options{NoWhatIf: true})
			if err != nil {
				t.Fatal(err)
			}
			e.Path = ""
			compare(t, e, readGolden(t, g))
		})
	}
}

// TestCategoriesGolden compares holders by memory category at the end and
// at the peak with the goldens ref_explain.py wrote from its own reading
// of the category rules (docs/explain.md), on every real fixture.
func TestCategoriesGolden(t *testing.T) {
	goldens, _ := filepath.Glob("../testdata/golden/*.categories-*.json")
	if len(goldens) < 16 {
		t.Fatalf("only %d category goldens; run testdata/regen_golden.sh", len(goldens))
	}
	for _, g := range goldens {
		base := filepath.Base(g)
		i := strings.LastIndex(base, ".categories-")
		name, at := base[:i], strings.TrimSuffix(base[i+len(".categories-"):], ".json")
		t.Run(base, func(t *testing.T) {
			d, err := NewDevice(decode(t, source(t, name)), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			h, err := d.Holders(at, d.Grouper(ByCategory), 0)
			if err != nil {
				t.Fatal(err)
			}
			h.Path = ""
			compare(t, h, readGolden(t, g))
		})
	}
}
