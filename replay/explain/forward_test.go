package explain

import (
	"testing"
)

// TestHoldersForwardFrames: on testdata/forward_frames.pickle
// (gen_forward.py) the gradients made on autograd's thread, whose own
// stacks are native only, are grouped under the forward traceback's user
// frame; a traceback with no user frame leaves the autograd node.
func TestHoldersForwardFrames(t *testing.T) {
	c := decode(t, source(t, "forward_frames.pickle"))
	d, err := NewDevice(c, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.Holders("end", &Grouper{By: ByCallsite, Stack: c.Snapshot.Stack}, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, g := range h.Groups {
		got[g.Key] = g.Bytes
	}
	const MiB = 1 << 20
	for k, want := range map[string]int64{
		"forward (/job/model.py:58) [backward]":       9 * MiB,
		"Block.forward (/job/model.py:40) [backward]": 6 * MiB,
		"AddBackward0 (backward)":                     3 * MiB / 2,
		"MulBackward0 (backward)":                     9 * MiB / 8,
	} {
		if got[k] != want {
			t.Errorf("%q: %d bytes, want %d (groups %v)", k, got[k], want, got)
		}
	}
}
