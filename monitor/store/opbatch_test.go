package store

import "testing"

// TestOpBatcher: ops reach the sink in order, in batches cut at 256 ops
// and at step ends; Flush sends the rest, and an empty Flush sends nothing.
func TestOpBatcher(t *testing.T) {
	var got [][]Op
	b := NewOpBatcher(func(ops []Op) { got = append(got, ops) })
	for i := range 300 {
		b.Add(Op{Name: "op", StartUS: int64(i)})
	}
	if len(got) != 1 || len(got[0]) != 256 {
		t.Fatalf("after 300 ops: %d batches", len(got))
	}
	b.Add(Op{Name: "step", StartUS: 300, IsStep: true})
	if len(got) != 2 || len(got[1]) != 45 || !got[1][44].IsStep {
		t.Fatalf("a step did not end the batch: %d batches", len(got))
	}
	b.Add(Op{Name: "op", StartUS: 301})
	b.Flush()
	b.Flush()
	if len(got) != 3 || len(got[2]) != 1 {
		t.Fatalf("flush: %d batches", len(got))
	}
	n := int64(0)
	for _, batch := range got {
		for _, op := range batch {
			if op.StartUS != n {
				t.Fatalf("op %d out of order: start %d", n, op.StartUS)
			}
			n++
		}
	}
}
