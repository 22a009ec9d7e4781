package jobdir

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/capture"
	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/monitor/ranks"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
)

const MiB = 1 << 20

func touch(t *testing.T, path string, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestRankInName(t *testing.T) {
	for name, want := range map[string]int{
		"rank0": 0, "rank7": 7, "RANK12": 12, "rank_3": 3, "rank-4": 4, "snapshot_rank5_step10.pickle": 5,
		"rank6.pickle": 6, "job.rank8.json": 8, "msinsight_rank1": 1,
	} {
		if got, ok := rankInName(name); !ok || got != want {
			t.Errorf("%q: %d %v, want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"ranking0", "frank0", "rank", "snapshot_step10.pickle", "rankx1", "prerank2_x"} {
		if got, ok := rankInName(name); ok {
			t.Errorf("%q: rank %d, want none", name, got)
		}
	}
}

func TestFindRankDirs(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	touch(t, filepath.Join(dir, "rank0", "snapshot_a.pickle"), "x", t0)
	touch(t, filepath.Join(dir, "rank0", "snapshot_b.pickle"), "x", t0.Add(time.Minute)) // newest of rank 0
	touch(t, filepath.Join(dir, "rank0", "notes.txt"), "x", t0.Add(time.Hour))
	touch(t, filepath.Join(dir, "rank1", "oom_snapshot_1"), "x", t0)
	touch(t, filepath.Join(dir, "rank1", "empty.pickle"), "", t0.Add(time.Hour)) // being written: skipped
	touch(t, filepath.Join(dir, "other", "snapshot.pickle"), "x", t0)
	got, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Member{
		{Rank: 0, Path: filepath.Join(dir, "rank0", "snapshot_b.pickle"), Kind: capture.Snapshot, Rule: "name"},
		{Rank: 1, Path: filepath.Join(dir, "rank1", "oom_snapshot_1"), Kind: capture.Snapshot, Rule: "name"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Files named *_rank{N}_*: a rank named twice takes the newest file.
func TestFindRankFiles(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	touch(t, filepath.Join(dir, "snap_rank0_step10.pickle"), "x", t0)
	touch(t, filepath.Join(dir, "snap_rank0_step20.pickle"), "x", t0.Add(time.Minute))
	touch(t, filepath.Join(dir, "snap_rank1_step10.pickle"), "x", t0)
	touch(t, filepath.Join(dir, "snap_rank2_step10.log"), "x", t0) // not a snapshot name
	got, err := Find(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != filepath.Join(dir, "snap_rank0_step20.pickle") || got[1].Rank != 1 {
		t.Fatalf("got %+v", got)
	}
}

// One rank alone, or nothing rank-like: not a ranks directory.
func TestFindNotRanks(t *testing.T) {
	dir := t.TempDir()
	touch(t, filepath.Join(dir, "snap_rank0.pickle"), "x", time.Now())
	touch(t, filepath.Join(dir, "snapshot.pickle"), "x", time.Now())
	if got, err := Find(dir); err != nil || got != nil {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := Find(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing directory: no error")
	}
}

// The real msinsight profiler directories name their rank in
// profiler_info_{N}.json.
func TestFindProfilerFixture(t *testing.T) {
	root := fixture.Path(t, "ascend_profiler")
	got, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Rank != 0 || got[1].Rank != 1 || got[0].Kind != capture.Profiler || got[0].Rule != "profiler_info" ||
		filepath.Base(got[0].Path) != "msinsight_rank0" || filepath.Base(got[1].Path) != "msinsight_rank1" {
		t.Fatalf("got %+v", got)
	}
}

// testdata/job (gen_ranks.py): the Store figures of each rank and the
// imbalance, as the generator's docstring works them out.
func TestFiguresAndCompare(t *testing.T) {
	ms, err := Find("testdata/job")
	if err != nil || len(ms) != 3 {
		t.Fatalf("Find: %+v %v", ms, err)
	}
	want := []ranks.Figures{
		{Rank: 0, Device: 0, PeakReservedBytes: 20 * MiB, PeakActiveBytes: 10 * MiB, ReservedBytes: 20 * MiB, ActiveBytes: MiB, AllocatedBytes: MiB},
		{Rank: 1, Device: 1, PeakReservedBytes: 40 * MiB, PeakActiveBytes: 30 * MiB, ReservedBytes: 40 * MiB, ActiveBytes: MiB, AllocatedBytes: MiB, OOMs: 1},
		{Rank: 2, Device: 2, PeakReservedBytes: 30 * MiB, PeakActiveBytes: 15 * MiB, ReservedBytes: 30 * MiB, ActiveBytes: MiB, AllocatedBytes: MiB},
	}
	var figs []ranks.Figures
	for i, m := range ms {
		st := store.New(store.Options{})
		if _, err := watch.Load(context.Background(), m.Path, st, watch.LoadOptions{}); err != nil {
			t.Fatal(err)
		}
		f, ok := ranks.FromStore(m.Rank, st)
		if !ok {
			t.Fatalf("rank %d: no figures", m.Rank)
		}
		w := want[i]
		if f.Rank != w.Rank || f.Device != w.Device || f.PeakReservedBytes != w.PeakReservedBytes || f.PeakActiveBytes != w.PeakActiveBytes ||
			f.PeakRequestedBytes != w.PeakActiveBytes || f.ReservedBytes != w.ReservedBytes || f.ActiveBytes != w.ActiveBytes ||
			f.AllocatedBytes != w.AllocatedBytes || f.OOMs != w.OOMs || f.PeakActiveTime != 1_700_000_000_000_000+int64(i)*1000+20 {
			t.Errorf("rank %d: %+v, want %+v", m.Rank, f, w)
		}
		figs = append(figs, f)
	}
	ims := ranks.Compare(figs)
	wantIm := []ranks.Imbalance{
		{Figure: "peak_reserved_bytes", MaxRank: 1, MaxBytes: 40 * MiB, MinRank: 0, MinBytes: 20 * MiB, Ratio: 2},
		{Figure: "peak_requested_bytes", MaxRank: 1, MaxBytes: 30 * MiB, MinRank: 0, MinBytes: 10 * MiB, Ratio: 3},
		{Figure: "peak_active_bytes", MaxRank: 1, MaxBytes: 30 * MiB, MinRank: 0, MinBytes: 10 * MiB, Ratio: 3},
	}
	if len(ims) != len(wantIm) {
		t.Fatalf("imbalance %+v", ims)
	}
	for i := range wantIm {
		if ims[i] != wantIm[i] {
			t.Errorf("imbalance %d: %+v, want %+v", i, ims[i], wantIm[i])
		}
	}
}

// torch_npu's per-rank SQLite exports name their rank.
func TestFindDBExports(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"ascend_pytorch_profiler_0.db", "ascend_pytorch_profiler_1.db", "ascend_pytorch_profiler.db", "msprof_0.db"} {
		touch(t, filepath.Join(dir, n), "x", time.Now())
	}
	got, err := Find(dir)
	if err != nil || len(got) != 2 || got[1].Rank != 1 || got[1].Kind != capture.Profiler || got[1].Rule != "db_name" ||
		filepath.Base(got[1].Path) != "ascend_pytorch_profiler_1.db" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

// A directory of more than MaxRanks ranks is refused with a message naming
// the count and the limit; MaxRanks ranks still open.
func TestFindRankCap(t *testing.T) {
	dir := t.TempDir()
	for r := range MaxRanks {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("snap_rank%d.pickle", r)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := Find(dir); err != nil || len(ms) != MaxRanks {
		t.Fatalf("%d ranks: %d found, %v", MaxRanks, len(ms), err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("snap_rank%d.pickle", MaxRanks)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Find(dir)
	if err == nil || !strings.Contains(err.Error(), "holds 1025 ranks, over the limit of 1024 for one job directory") {
		t.Fatalf("over the cap: %v", err)
	}
}
