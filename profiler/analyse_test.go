package profiler

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestOperatorDetailsSelfTime: host self time is total minus the directly
// nested ops on the same thread; other threads do not count.
func TestOperatorDetailsSelfTime(t *testing.T) {
	d := &Data{Ops: []Op{
		{Name: "outer", StartNS: 0, EndNS: 10000, DurNS: 10000, TID: 1},
		{Name: "child1", StartNS: 1000, EndNS: 4000, DurNS: 3000, TID: 1},
		{Name: "grandchild", StartNS: 2000, EndNS: 3000, DurNS: 1000, TID: 1},
		{Name: "child2", StartNS: 5000, EndNS: 6000, DurNS: 1000, TID: 1},
		{Name: "other-thread", StartNS: 1000, EndNS: 9000, DurNS: 8000, TID: 2, InputShapes: "1,2;3", Stack: "a.py(1): f;b.py(2): g"},
	}}
	self := selfDurations(d.Ops)
	want := []int64{6000, 2000, 1000, 1000, 8000}
	for i := range want {
		if self[i] != want[i] {
			t.Errorf("%s: self %d, want %d", d.Ops[i].Name, self[i], want[i])
		}
	}
	var buf bytes.Buffer
	if err := writeOperatorDetails(&buf, d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "outer,,,6.000,10.000,0,0,0,0\r\n") ||
		!strings.Contains(buf.String(), "\"1,2;\r\n3\",\"a.py(1): f;\r\nb.py(2): g\"") {
		t.Fatalf("operator_details.csv:\n%q", buf.String())
	}
	ops, err := DecodeOperatorDetailsCSV(&buf, "operator_details.csv")
	if err != nil || len(ops) != 5 || ops[4].InputShapes != "1,2;3" || ops[4].Stack != "a.py(1): f;b.py(2): g" || ops[0].DurNS != 10000 {
		t.Fatalf("read back: %v %+v", err, ops)
	}
	owner := opIndex(d.Ops)
	for i, c := range []struct {
		tid  uint64
		t    int64
		want string
	}{{1, 2500, "grandchild"}, {1, 4500, "outer"}, {1, 5000, "child2"}, {2, 2500, "other-thread"}, {3, 2500, ""}, {1, 20000, ""}} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if got := owner(c.tid, c.t); got != c.want {
				t.Errorf("owner(%d, %d) = %q, want %q", c.tid, c.t, got, c.want)
			}
		})
	}
}
