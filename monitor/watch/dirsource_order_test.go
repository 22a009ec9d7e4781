package watch_test

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

func names(cs []capture.Entry) []string {
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
	var got []capture.Entry
	if err := watch.ScanDir(dir, func(c capture.Entry) error { got = append(got, c); return nil }); err != nil {
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

// numbersOf maps each numbered capture's file name to its number.
func numbersOf(cs []capture.Entry) map[string]int {
	out := map[string]int{}
	for _, c := range cs {
		if c.Index > 0 {
			out[filepath.Base(c.Path)] = c.Index
		}
	}
	return out
}

func scanned(t *testing.T, dir string) []capture.Entry {
	t.Helper()
	var got []capture.Entry
	if err := watch.ScanDir(dir, func(c capture.Entry) error { got = append(got, c); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestPickerAndListNumberAlike: the numbers a running watch gives its
// captures (the picker's, key c) are the ones a fresh `watch --list`
// prints and `--open N` takes, after a dump lands, one is rewritten in
// place and one is removed (the watch had kept the rewritten one in its
// old place and numbered the removed one).
func TestPickerAndListNumberAlike(t *testing.T) {
	dir := snapshotDir(t)
	st := store.New(store.Options{})
	wd := watch.NewDirSource(dir, st, watch.DirOptions{Follow: true})
	if err := wd.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer wd.Stop()
	<-wd.Ready()
	if got, want := numbersOf(wd.List()), numbersOf(scanned(t, dir)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("at start: watch %v, --list %v", got, want)
	}
	data, _ := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	if err := os.WriteFile(filepath.Join(dir, "fresh.pickle"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the new dump to be listed", func() bool { n := numbersOf(wd.List()); return n["fresh.pickle"] > 0 && !writing(wd.List()) })
	// the oldest is rewritten in place (a job dumping to one name each step)
	time.Sleep(20 * time.Millisecond) // a later mtime than fresh.pickle's, even on a coarse clock
	if err := os.WriteFile(filepath.Join(dir, "c_oldest.pickle"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the rewritten dump to move", func() bool {
		n := numbersOf(wd.List())
		return n["c_oldest.pickle"] > n["fresh.pickle"] && !writing(wd.List())
	})
	if err := os.Remove(filepath.Join(dir, "b_middle.pickle")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the removal to be seen", func() bool { _, ok := numbersOf(wd.List())["b_middle.pickle"]; return !ok })
	got, want := numbersOf(wd.List()), numbersOf(scanned(t, dir))
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) != 4 {
		t.Fatalf("watch numbers %v, --list numbers %v", got, want)
	}
	if l := wd.List(); !l[len(l)-1].Removed || l[len(l)-1].Index != 0 || filepath.Base(l[len(l)-1].Path) != "b_middle.pickle" {
		t.Errorf("the removed dump: %+v", l[len(l)-1])
	}
}

func writing(cs []capture.Entry) bool {
	for _, c := range cs {
		if c.Writing {
			return true
		}
	}
	return false
}

// TestScanDirListsFilesBeingWritten: `watch --list` right after files land
// lists them all — one still being written (not complete, changed just
// now) as such, not left out.
func TestScanDirListsFilesBeingWritten(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(fixture.Path(t, "snapshots/cuda-2.0-flexgen-oom_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "done.pickle"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "half.pickle"), data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	got := scanned(t, dir)
	if len(got) != 2 {
		t.Fatalf("listed %+v", got)
	}
	for _, c := range got {
		switch filepath.Base(c.Path) {
		case "done.pickle":
			if c.Writing || c.Error != "" {
				t.Errorf("complete dump: %+v", c)
			}
		case "half.pickle":
			if !c.Writing || !strings.HasPrefix(c.Error, "not complete yet: ") || c.Size != int64(len(data)/2) || c.Index == 0 {
				t.Errorf("dump being written: %+v", c)
			}
		}
	}
}
