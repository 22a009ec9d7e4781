package watch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/npumon/npumon/internal/testutil/fixture"
	"github.com/npumon/npumon/internal/testutil/poll"
	"github.com/npumon/npumon/monitor/store"
	"github.com/npumon/npumon/monitor/watch"
)

// snapshotDir writes the real fixtures into a fresh directory under names
// whose order is the reverse of their modification times, plus a truncated
// dump, and returns the directory.
func snapshotDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i, f := range []struct{ src, name string }{
		{"snapshots/cuda-2.0-flexgen-oom_snapshot.pickle", "c_oldest.pickle"},
		{"snapshots/cuda-2.0-flexgen-1.3b_snapshot.pickle", "b_middle.pickle"},
		{"snapshots/cuda-2026-assignment2-memory_snapshot.pickle", "a_newest.pickle"},
	} {
		data, err := os.ReadFile(fixture.Path(t, f.src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	// a dump cut short by a crashed job, the newest file of all
	data, _ := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	p := filepath.Join(dir, "crashed.pickle")
	if err := os.WriteFile(p, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	mt := base.Add(10 * time.Minute)
	os.Chtimes(p, mt, mt)
	return dir
}

func names(cs []watch.Entry) []string {
	var out []string
	for _, c := range cs {
		out = append(out, filepath.Base(c.Path))
	}
	return out
}

// TestScanDirArrivalOrder: --list is in arrival order (modification time),
// numbered from 1, and the unreadable dump is listed with its error.
func TestScanDirArrivalOrder(t *testing.T) {
	dir := snapshotDir(t)
	var got []watch.Entry
	if err := watch.ScanDir(dir, func(c watch.Entry) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if n := names(got); strings.Join(n, " ") != "c_oldest.pickle b_middle.pickle a_newest.pickle crashed.pickle" {
		t.Fatalf("order %v", n)
	}
	for i, c := range got {
		if c.Index != i+1 {
			t.Errorf("%s: index %d, want %d", c.Path, c.Index, i+1)
		}
	}
	if e := got[3].Error; e == "" || strings.Contains(e, "\n") {
		t.Errorf("crashed dump: error %q, want one line", e)
	}
}

// TestDirSourceOpensNewestAndHolds: a directory that already holds dumps
// opens the newest readable one by modification time; while the user
// works in it (held) a new dump is listed and counted, not opened;
// FollowNewest opens it and follows again.
func TestDirSourceOpensNewestAndHolds(t *testing.T) {
	dir := snapshotDir(t)
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	poll.Until(t, "the newest dump to open", func() bool { return filepath.Base(wd.Current()) == "a_newest.pickle" })
	if n := names(wd.List()); strings.Join(n, " ") != "c_oldest.pickle b_middle.pickle a_newest.pickle crashed.pickle" {
		t.Errorf("picker order %v", n)
	}
	if l := wd.List(); l[3].Error == "" {
		t.Errorf("the crashed dump is in the picker without its error: %+v", l[3])
	}

	wd.SetHold(true)
	data, _ := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	fresh := filepath.Join(dir, "fresh.pickle")
	if err := os.WriteFile(fresh, data, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the new dump to be counted", func() bool { return wd.NewCaptures() == 1 })
	if filepath.Base(wd.Current()) != "a_newest.pickle" {
		t.Fatalf("the held capture was replaced by %s", wd.Current())
	}
	if err := wd.FollowNewest(); err != nil {
		t.Fatal(err)
	}
	if wd.Current() != fresh || wd.NewCaptures() != 0 || !wd.Following() {
		t.Errorf("after FollowNewest: open %s, %d new, following %v", wd.Current(), wd.NewCaptures(), wd.Following())
	}
}

// TestDirSourceFollowsNewestOfABurst: dumps that land together settle in
// the same tick; the newest by modification time is the one opened, not
// whichever the pending set happens to yield last (found by the soak test).
func TestDirSourceFollowsNewestOfABurst(t *testing.T) {
	older, _ := os.ReadFile(fixture.Path(t, "snapshots/cuda-silmont-mem_snapshot.pickle"))
	newer, _ := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	for range 4 {
		dir := t.TempDir()
		wd := watch.NewDirSource(dir, store.New(store.Options{}), watch.DirOptions{Follow: true})
		if err := wd.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-wd.Ready()
		// names in the reverse order of their times, so name order cannot pass for time order
		for i, name := range []string{"z_1.pickle", "y_2.pickle", "x_3.pickle"} {
			data := older
			if i == 2 {
				data = newer
			}
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		poll.Within(t, 10*time.Second, "the newest of the burst to open", func() bool { return filepath.Base(wd.Current()) == "x_3.pickle" })
		time.Sleep(300 * time.Millisecond) // nothing older may replace it
		if got := filepath.Base(wd.Current()); got != "x_3.pickle" {
			t.Errorf("the newest x_3.pickle was replaced by the older %s", got)
		}
		wd.Stop()
	}
}
