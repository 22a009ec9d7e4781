package replay

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestFlavourEvidence: torch_npu vs PyTorch's CUDA allocator is decided by
// the strongest evidence in the file and the capture says which: a CUDA
// torch 2.1 dump with a side stream (no time_us, no allocator_settings) is
// CUDA, by its stream 0 or by frames inside torch's CUDA code; frames
// inside torch_npu make a torch_npu dump; non-zero stream handles alone are
// weak evidence for torch_npu.
func TestFlavourEvidence(t *testing.T) {
	for _, tc := range []struct {
		file, schema, evidence string
		npu                    bool
	}{
		{"flavour_cuda21_sidestream.pickle", SchemaTorch21, "stream 0 is CUDA's default stream", false},
		{"flavour_cuda21_sideonly.pickle", SchemaTorch21, "frames inside torch's CUDA code", false},
		{"flavour_npu_frames.pickle", SchemaTorchNPU, "frames inside torch_npu", true},
		{"flavour_npu_streams.pickle", SchemaTorchNPU, "weak evidence", true},
		{"npu_workspace.pickle", SchemaTorchNPU, "workspace_snapshot entries", true},
		{"cuda21_p4.pickle", SchemaTorch21, "PYTORCH_CUDA_ALLOC_CONF", false},
		{"torch113_list.pickle", SchemaTorch113, "torch 1.13 layout", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			c := mustDecode(t, filepath.Join("testdata", tc.file))
			if c.Schema != tc.schema || !strings.Contains(c.SchemaEvidence, tc.evidence) || c.Snapshot.TorchNPU != tc.npu {
				t.Errorf("schema %s (%s), torch_npu %v; want %s (…%s…), %v", c.Schema, c.SchemaEvidence, c.Snapshot.TorchNPU, tc.schema, tc.evidence, tc.npu)
			}
			st, err := ComputeStats(c, StatsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if st.SchemaEvidence != c.SchemaEvidence {
				t.Errorf("stats schema_evidence %q", st.SchemaEvidence)
			}
		})
	}
}
