package workload

import (
	"fmt"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
	"github.com/npumon/npumon/replay/explain"
)

// TestCategoriesMatchTruth: the category rules, given only the snapshot
// the demo writes, agree with what the demo knows each allocation is
// (Config.OnAlloc) for at least 95 % of the bytes allocated, and of the
// bytes live at the active peak.
func TestCategoriesMatchTruth(t *testing.T) {
	for _, sc := range []Scenario{Steady, Leak, Fragmentation} {
		t.Run(fmt.Sprint(sc), func(t *testing.T) {
			truth := map[uint64][]category.Category{} // per address, in allocation order
			cfg := Config{Scenario: sc, Seed: 3, Layers: 2, DeviceMem: 16 << 30}
			cfg.OnAlloc = func(addr uint64, _ int64, c category.Category) { truth[addr] = append(truth[addr], c) }
			w, _, _, err := runSteps(t, cfg, 6)
			if err != nil {
				t.Fatal(err)
			}
			s := w.Allocator().Snapshot()
			tl, err := replay.NewTimelineWithoutInitial(s, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(tl.Start()) != 0 {
				t.Fatalf("%d allocations before the trace: the demo records from its start", len(tl.Start()))
			}
			tab := explain.Categorize(tl, s.Stack)
			want := make([]category.Category, len(tl.Entries))
			var all, agree int64
			wrong := map[[2]category.Category]int64{}
			for i := range tl.Entries {
				e := &tl.Entries[i]
				if e.Action != snapshot.ActionAlloc {
					continue
				}
				q := truth[e.Addr]
				if len(q) == 0 {
					t.Fatalf("entry %d: an allocation at 0x%x the workload did not report", i, e.Addr)
				}
				want[i], truth[e.Addr] = q[0], q[1:]
				got := tab.Entry(i)
				all += e.Size
				if got == want[i] {
					agree += e.Size
				} else {
					wrong[[2]category.Category{want[i], got}] += e.Size
				}
			}
			kinds := map[category.Category]bool{}
			for i := range want {
				if tl.Entries[i].Action == snapshot.ActionAlloc {
					kinds[want[i]] = true
				}
			}
			for _, c := range []category.Category{category.Parameter, category.Gradient, category.OptimizerState, category.Activation, category.Temporary} {
				if !kinds[c] {
					t.Errorf("the demo made no %s allocation: the comparison does not cover that rule", c)
				}
			}
			if share := float64(agree) / float64(all); share < 0.95 {
				t.Errorf("categories agree for %.1f%% of the bytes allocated, want ≥ 95%%; (truth, rules): bytes %v", 100*share, wrong)
			}
			// the live bytes at the peak
			peak := explain.PeakIndex(tl)
			var live, liveAgree int64
			for _, a := range explain.LiveAfter(tl, peak) {
				live += a.Size
				if tab.Of(a.Born, a.Addr) == want[a.Born] {
					liveAgree += a.Size
				}
			}
			if share := float64(liveAgree) / float64(live); share < 0.95 {
				t.Errorf("categories agree for %.1f%% of the bytes live at the peak (entry %d), want ≥ 95%%", 100*share, peak)
			}
			t.Logf("allocated: %.2f%% agree; live at the peak: %.2f%%; disagreements (truth, rules): %v",
				100*float64(agree)/float64(all), 100*float64(liveAgree)/float64(live), wrong)
		})
	}
}
