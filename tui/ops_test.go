package tui

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/npumon/npumon/monitor/store"
)

// TestOpsFollowLiveStore: on a live Store receiving ops (some late and out
// of start order), the op list, the step index and the op table, refreshed
// incrementally every tick, equal a from-scratch read and rebuild, in every
// sort order and with a filter.
func TestOpsFollowLiveStore(t *testing.T) {
	for sortBy := range opSortNames {
		for _, flt := range []string{"", "matmul|add"} {
			t.Run(fmt.Sprintf("sort=%s,filter=%q", opSortNames[sortBy], flt), func(t *testing.T) {
				st := store.New(store.Options{})
				o := testOptions(st)
				o.Live = true
				m := newSized(t, o, 120, 40)
				m.p.ops.sort = sortBy
				f, err := parseFilter(flt)
				if err != nil {
					t.Fatal(err)
				}
				m.setFilter(f)
				r := rand.New(rand.NewPCG(3, uint64(sortBy)))
				names := []string{"aten::matmul", "aten::add", "aten::linear", "aten::copy_"}
				next := int64(1_000_000)
				for tick := 0; tick < 150; tick++ {
					var batch []store.Op
					for range r.IntN(6) {
						start := next
						if r.IntN(5) == 0 {
							start -= r.Int64N(40_000_000) // late, beyond any margin
						}
						batch = append(batch, store.Op{Name: names[r.IntN(len(names))], StartUS: start,
							EndUS: start + r.Int64N(5000), MemDelta: r.Int64N(3) << 20, Seq: int64(tick), IsStep: r.IntN(8) == 0})
						next += 1000
					}
					st.AppendOps(batch)
					m.refreshData()
					want := st.Ops(minInt64, maxInt64)
					if !reflect.DeepEqual(m.p.ops.ops, want) {
						t.Fatalf("tick %d: %d ops, want %d", tick, len(m.p.ops.ops), len(want))
					}
					var steps []int
					for i := range want {
						if want[i].IsStep {
							steps = append(steps, i)
						}
					}
					if !reflect.DeepEqual(m.p.ops.steps, steps) && (len(steps) > 0 || len(m.p.ops.steps) > 0) {
						t.Fatalf("tick %d: step index %v\nwant %v", tick, m.p.ops.steps, steps)
					}
					var view []int
					for i := range want {
						if m.pr.flt.matchOp(&want[i]) {
							view = append(view, i)
						}
					}
					sort.SliceStable(view, func(a, b int) bool { return m.p.ops.opLess(view[a], view[b]) })
					if !reflect.DeepEqual(m.p.ops.shown, view) && (len(view) > 0 || len(m.p.ops.shown) > 0) {
						t.Fatalf("tick %d: op table %v\nwant %v", tick, m.p.ops.shown, view)
					}
				}
			})
		}
	}
}

// TestOpsTableFollowsHeaderOp: an op that crosses a step boundary is the
// op the header names inside the next step (steps are never attributed
// to), and the op table highlights that same op, not the ProfilerStep#N
// marker that started later (issue: header aten::copy_async, table
// ProfilerStep#2).
func TestOpsTableFollowsHeaderOp(t *testing.T) {
	st := store.New(store.Options{})
	st.IngestOps([]store.Op{
		{Name: "ProfilerStep#1", StartUS: t0, EndUS: t0 + 100, IsStep: true, Step: 1, Seq: -1},
		{Name: "aten::copy_async", StartUS: t0 + 90, EndUS: t0 + 150, Step: 1, Seq: -1},
		{Name: "ProfilerStep#2", StartUS: t0 + 100, EndUS: t0 + 200, IsStep: true, Step: 2, Seq: -1},
		{Name: "aten::add", StartUS: t0 + 160, EndUS: t0 + 170, Step: 2, Seq: -1},
	})
	m := newSized(t, testOptions(st), 160, 48)
	for _, c := range []struct {
		at   int64
		want string
	}{{t0 + 120, "aten::copy_async"}, {t0 + 165, "aten::add"}, {t0 + 180, "aten::add"}, {t0 + 95, "aten::copy_async"}} {
		m.setCursor(c.at)
		if len(m.p.ops.shown) == 0 {
			t.Fatal("empty op table")
		}
		got := m.p.ops.ops[m.p.ops.shown[m.p.ops.sel]].Name
		if c.at == t0+180 {
			// between ops: the step that holds the cursor
			if m.at.hasOpAt || got != "ProfilerStep#2" {
				t.Errorf("cursor +%d (no op): header op %v, table on %q, want ProfilerStep#2", c.at-t0, m.at.hasOpAt, got)
			}
			continue
		}
		if !m.at.hasOpAt || m.at.opAt.Name != c.want || got != c.want {
			t.Errorf("cursor +%d: header op %q (%v), table op %q; want both %q", c.at-t0, m.at.opAt.Name, m.at.hasOpAt, got, c.want)
		}
	}
}
