package classify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

func copyTo(t *testing.T, src, name string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPathByContent: every kind of input is recognised by what it holds,
// not by its name.
func TestPathByContent(t *testing.T) {
	db := fixture.Path(t, "ascend_profiler/msinsight_msprof_0.db")
	tv := fixture.Path(t, "ascend_profiler/mstt/trace_view.json")
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "notes.txt"), []byte("hello"), 0o644)
	empty := filepath.Join(t.TempDir(), "empty.pickle")
	os.WriteFile(empty, nil, 0o644)
	for _, tc := range []struct {
		name string
		path string
		want Kind
	}{
		{"sqlite export under its own name", db, SQLite},
		{"sqlite export renamed", copyTo(t, db, "capture.bin"), SQLite},
		{"sqlite export named like a snapshot", copyTo(t, db, "dump.pickle"), SQLite},
		{"trace_view.json", tv, TraceView},
		{"trace_view renamed .json snapshot", copyTo(t, tv, "snapshot.json"), TraceView},
		{"real pickle snapshot", fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle"), SnapshotPickle},
		{"pickle without extension", copyTo(t, fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"), "oom"), SnapshotPickle},
		{"json dict snapshot", "../../replay/testdata/cuda21.json", SnapshotJSON},
		{"json list of segments (torch 1.13)", "../../replay/testdata/torch113_list.json", SnapshotJSON},
		{"analysed-only profiler directory", fixture.Path(t, "ascend_profiler/msinsight_rank0"), ProfilerDir},
		{"its ASCEND_PROFILER_OUTPUT", fixture.Path(t, "ascend_profiler/msinsight_rank0/ASCEND_PROFILER_OUTPUT"), ProfilerDir},
		{"parent of profiler directories", fixture.Path(t, "ascend_profiler"), ProfilerParent},
		{"plain directory", plain, PlainDir},
		{"empty file", empty, Unknown},
		{"text file", filepath.Join(plain, "notes.txt"), Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Path(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if in.Kind != tc.want {
				t.Errorf("%s: %v (%s), want %v", tc.path, in.Kind, in.Why, tc.want)
			}
			if (tc.want == Unknown || tc.want == PlainDir) && in.Why == "" {
				t.Errorf("%s: no reason given", tc.path)
			}
		})
	}
	if _, err := Path(filepath.Join(plain, "missing")); err == nil {
		t.Error("a missing path classified without error")
	}
}

// FuzzContent: any bytes classify without a panic, and a kind npumon does
// not read always says why.
func FuzzContent(f *testing.F) {
	for _, seed := range [][]byte{nil, []byte("SQLite format 3\x00"), []byte(`[{"ph":"X"}]`), []byte(`{"segments":[]}`),
		[]byte("\x80\x04}."), []byte(" \n{\"traceEvents\":[]}"), []byte("\xef\xbb\xbf["), []byte("(lp0")} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, why := Content(b)
		if k == Unknown && why == "" {
			t.Errorf("%q: unknown without a reason", b)
		}
	})
}
