package replay

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// TestStatsGolden compares ComputeStats with goldens written by the Python
// reference implementation (testdata/ref_stats.py over pickle.load), for
// every real fixture and generated variant, final state and --at-index.
func TestStatsGolden(t *testing.T) {
	goldens, _ := filepath.Glob("testdata/golden/*.stats.json")
	if len(goldens) < 30 {
		t.Fatalf("only %d golden files; run testdata/regen_golden.sh", len(goldens))
	}
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".stats.json")
		var opts StatsOptions
		if i := strings.LastIndex(name, ".at"); i > 0 {
			n, err := strconv.Atoi(name[i+3:])
			if err != nil {
				t.Fatalf("%s: bad golden name", g)
			}
			opts.AtIndex = &n
			name = name[:i]
		}
		src := filepath.Join("testdata", name)
		if _, err := os.Stat(src); err != nil {
			src = fixture.Path(t, "snapshots/"+name)
		}
		t.Run(filepath.Base(g), func(t *testing.T) {
			c := mustDecode(t, src)
			st, err := ComputeStats(c, opts)
			if err != nil {
				t.Fatal(err)
			}
			st.Path = ""
			got := toMap(t, st)
			// The streaming path must agree with the in-memory one.
			fs, err := StatsFile(src, opts)
			if err != nil {
				t.Fatal(err)
			}
			fs.Path = ""
			if !reflect.DeepEqual(toMap(t, fs), got) {
				t.Errorf("StatsFile differs from ComputeStats:\n%+v\n%+v", fs, st)
			}
			data, err := os.ReadFile(g)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("stats differ from the Python reference\n got: %s\nwant: %s", gj, data)
			}
		})
	}
}

func toMap(t *testing.T, v any) map[string]any {
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
