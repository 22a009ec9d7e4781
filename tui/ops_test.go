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
				m.opSort = sortBy
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
					if !reflect.DeepEqual(m.ops, want) {
						t.Fatalf("tick %d: %d ops, want %d", tick, len(m.ops), len(want))
					}
					var steps []int
					for i := range want {
						if want[i].IsStep {
							steps = append(steps, i)
						}
					}
					if !reflect.DeepEqual(m.steps, steps) && (len(steps) > 0 || len(m.steps) > 0) {
						t.Fatalf("tick %d: step index %v\nwant %v", tick, m.steps, steps)
					}
					var view []int
					for i := range want {
						if m.flt.matchOp(&want[i]) {
							view = append(view, i)
						}
					}
					sort.SliceStable(view, func(a, b int) bool { return m.opLess(view[a], view[b]) })
					if !reflect.DeepEqual(m.opView, view) && (len(view) > 0 || len(m.opView) > 0) {
						t.Fatalf("tick %d: op table %v\nwant %v", tick, m.opView, view)
					}
				}
			})
		}
	}
}
