package replay

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// forwardEntries are the entries of device 0 that carry a forward
// traceback, with their stacks.
func forwardEntries(s *snapshot.Snapshot) map[int]snapshot.Stack {
	out := map[int]snapshot.Stack{}
	for i := range s.DeviceTraces[0] {
		if st := s.ForwardStack(0, i); st != nil {
			out[i] = st
		}
	}
	return out
}

// TestForwardFramesDecode: testdata/forward_frames.pickle (gen_forward.py,
// Python's own pickle) decodes the same with the fast entry path and the
// general one, the fast path decoding the entries without forward_frames;
// every backward entry that had a traceback keeps it, innermost first.
func TestForwardFramesDecode(t *testing.T) {
	data, err := os.ReadFile("testdata/forward_frames.pickle")
	if err != nil {
		t.Fatal(err)
	}
	r := decodeBothWays(data, false)
	if r.fastErr != nil || r.slowErr != nil {
		t.Fatal(r.fastErr, r.slowErr)
	}
	if !reflect.DeepEqual(r.fast, r.slow) {
		t.Fatal("the fast and the general entry decoding give different models")
	}
	if r.n == 0 {
		t.Fatal("the fast entry path decoded no entry")
	}
	s := r.fast
	fw := forwardEntries(s)
	// Per iteration: 3 MiB (alloc), 1 MiB (alloc, 2 frees), MM, ADD: 6
	// entries with a traceback; MUL none (absent, then empty).
	if len(fw) != 18 {
		t.Fatalf("%d entries with a forward traceback, want 18", len(fw))
	}
	want := snapshot.Stack{
		{Filename: "/venv/lib/python3.12/site-packages/torch/functional.py", Line: 407, Name: "einsum"},
		{Filename: "/job/model.py", Line: 58, Name: "forward"},
		{Filename: "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", Line: 1751, Name: "_call_impl"},
		{Filename: "/job/train.py", Line: 57, Name: "train_step"},
		{Filename: "/job/train.py", Line: 120, Name: "main"},
	}
	mlp := snapshot.Stack{
		{Filename: "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", Line: 125, Name: "forward"},
		{Filename: "/job/model.py", Line: 40, Name: "Block.forward"},
		{Filename: "/job/model.py", Line: 90, Name: "Model.forward"},
		{Filename: "/job/train.py", Line: 57, Name: "train_step"},
	}
	odd := snapshot.Stack{{Name: "<traceback not available>"}}
	seen := map[string]int{}
	for i, st := range fw {
		e := s.DeviceTraces[0][i]
		if s.Stack(e.Frames)[0].Name != "torch::unwind::unwind()" {
			t.Fatalf("entry %d: the own stack is not the native one", i)
		}
		switch {
		case reflect.DeepEqual(st, want):
			seen["attn"]++
		case reflect.DeepEqual(st, mlp):
			seen["mlp"]++
		case reflect.DeepEqual(st, odd):
			seen["odd"]++
		default:
			t.Fatalf("entry %d: forward traceback %+v", i, st)
		}
	}
	if seen["attn"] != 12 || seen["mlp"] != 3 || seen["odd"] != 3 {
		t.Fatalf("tracebacks %v", seen)
	}
}

// TestForwardFramesRoundTrip: exported as pickle and as JSON and decoded
// again, the snapshot is the same model, forward tracebacks included.
func TestForwardFramesRoundTrip(t *testing.T) {
	c, err := DecodeFile("testdata/forward_frames.pickle", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name  string
		write func(*bytes.Buffer, *snapshot.Snapshot) error
	}{
		{"pickle", func(b *bytes.Buffer, s *snapshot.Snapshot) error { return WritePickle(b, s, ExportDict) }},
		{"json", func(b *bytes.Buffer, s *snapshot.Snapshot) error { return WriteJSON(b, s, ExportDict) }},
	} {
		var b bytes.Buffer
		if err := w.write(&b, c.Snapshot); err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b.Bytes(), []byte("forward_frames")) {
			t.Fatalf("%s: no forward_frames written", w.name)
		}
		back, err := Decode(bytes.NewReader(b.Bytes()), int64(b.Len()), Options{})
		if err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		if !SameModel(c.Snapshot, back.Snapshot) {
			t.Fatalf("%s: the round trip changed the model", w.name)
		}
		if got := forwardEntries(back.Snapshot); !reflect.DeepEqual(got, forwardEntries(c.Snapshot)) {
			t.Fatalf("%s: forward tracebacks differ after the round trip", w.name)
		}
	}
}

// TestParseForwardFrames: each string shape, and the order (outermost
// first in, innermost first out).
func TestParseForwardFrames(t *testing.T) {
	got := parseForwardFrames([]string{
		"/job/a.py:3:outer",
		"  File \"/job/b.py\", line 7, in mid\n    x()\n  File \"C:\\\\job\\\\c.py\", line 9, in inner\n    y()\n",
		"something else",
		"",
	})
	want := []snapshot.Frame{
		{Name: "something else"},
		{Filename: "C:\\\\job\\\\c.py", Line: 9, Name: "inner"},
		{Filename: "/job/b.py", Line: 7, Name: "mid"},
		{Filename: "/job/a.py", Line: 3, Name: "outer"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	back := parseForwardFrames(forwardStrings(got))
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("written and read back: %+v", back)
	}
}
