package sim

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/whatif"
)

// TestBaselineUsesExpandableSegmentsFromTrace: a torch_npu trace with
// segment_map entries (no allocator_settings) was recorded with expandable
// segments, so the baseline runs them too and reproduces the recording;
// the report says where that setting came from.
func TestBaselineUsesExpandableSegmentsFromTrace(t *testing.T) {
	res, err := Simulate(context.Background(), load(t, "testdata/expandable.pickle"), whatif.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.BaselineSource, "expandable_segments:True because the trace has 2 segment_map") {
		t.Errorf("baseline source %q does not say why expandable segments are on", res.BaselineSource)
	}
	d := &res.Devices[0]
	if !d.Runs[0].ExpandableSegments {
		t.Fatal("the baseline ran classic segments")
	}
	exact(t, d)
	if d.Runs[0].PeakReserved != 60*MiB {
		t.Errorf("baseline peak reserved %d MiB, want 60", d.Runs[0].PeakReserved/MiB)
	}
	if !d.Fidelity.CurvePinned {
		t.Error("a recording the baseline reproduces is not pinned")
	}
}

// TestFinalDeltaCaveat: the "trust only the final Δ" caveat shows when the
// trace has no segment events and when it has too few to pin the curve,
// and not when it has enough.
func TestFinalDeltaCaveat(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int // segment entries kept (-1: all)
		want string
	}{
		{"all segment events", -1, ""},
		{"none", 0, "the trace has no segment events"},
		{"one of ten", 1, "the trace has only 1 segment events where the baseline needed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := load(t, "testdata/fragmentation.pickle")
			tr := c.Snapshot.DeviceTraces[0]
			if tc.keep >= 0 {
				kept := 0
				tr = slices.DeleteFunc(slices.Clone(tr), func(e snapshot.TraceEntry) bool {
					if e.Action != snapshot.ActionSegmentAlloc && e.Action != snapshot.ActionSegmentFree {
						return false
					}
					kept++
					return kept > tc.keep
				})
				c.Snapshot.DeviceTraces[0] = tr
			}
			res, err := Simulate(context.Background(), c, whatif.Options{})
			if err != nil {
				t.Fatal(err)
			}
			line := res.Devices[0].FidelityLine()
			if tc.want == "" {
				if strings.Contains(line, "trust only the final Δ") || !res.Devices[0].Fidelity.CurvePinned {
					t.Errorf("caveat with every segment event recorded: %s", line)
				}
				return
			}
			if !strings.Contains(line, tc.want) || !strings.Contains(line, "trust only the final Δ") || res.Devices[0].Fidelity.CurvePinned {
				t.Errorf("fidelity line %q, want the caveat %q", line, tc.want)
			}
		})
	}
}

// TestCUDASideStreamRunsCUDA: a CUDA torch 2.1 dump with a side stream is
// re-simulated with the CUDA allocator (no 32-byte pad, paged device).
func TestCUDASideStreamRunsCUDA(t *testing.T) {
	res, err := Simulate(context.Background(), load(t, "../../testdata/flavour_cuda21_sidestream.pickle"), whatif.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Flavour != config.FlavourCUDA.String() || res.Placement != "paged" {
		t.Errorf("flavour %s placement %s, want cuda / paged", res.Flavour, res.Placement)
	}
}
