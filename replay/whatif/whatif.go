// Package whatif is the what-if's vocabulary: the options of a
// re-simulation of a recorded allocator trace under other allocator
// settings, its result (per device the recorded figures, the baseline and
// each alternative run, the baseline's fidelity), the baseline
// configuration a file implies, and the result's text. The simulation
// itself, which runs the allocator package's caching allocator on a
// simulated device, is replay/whatif/sim; readers of a result (the TUI,
// explain) need only this package.
package whatif

import (
	"context"
	"fmt"

	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// Simulator runs a what-if over a capture: sim.Simulate (replay/whatif/sim)
// is the one npumon runs. Readers of results take it as a value so that
// they need not import the allocator.
type Simulator func(ctx context.Context, c *replay.Capture, opts Options) (*Result, error)

// Options select the alternatives and the simulated device.
type Options struct {
	// Confs are alternative configurations in PYTORCH_NPU_ALLOC_CONF syntax
	// (PYTORCH_CUDA_ALLOC_CONF for a CUDA-flavoured run), each run from the
	// defaults as the environment variable would be.
	Confs []string
	// DeviceMem is the simulated device's memory in bytes; 0 derives it
	// from the file (see DeviceResult.DeviceMemSource).
	DeviceMem int64
	// Contiguous chooses the device model: true places every device
	// allocation in one free range of HBM, as npumon's simulated Ascend
	// device (acl) does, so a request can fail with enough bytes free;
	// false limits only the byte count (the driver maps pages), as on
	// CUDA. nil picks true for the NPU flavour and false for CUDA.
	Contiguous *bool
	// Flavour forces the allocator flavour; nil picks it from the file
	// (torch_npu files → NPU, everything else → CUDA).
	Flavour *config.Flavour
	// Devices limits the devices simulated; nil means every device the
	// snapshot mentions.
	Devices []int
	// Parallel bounds the runs in flight; 0 means GOMAXPROCS.
	Parallel int
	// Until, per device, ends each run after that trace entry (an oom
	// being explained: what the program did after it failed would not
	// have happened had it fitted); a device not in it runs to the end.
	Until map[int]int
}

// Result is the what-if answer for one snapshot.
type Result struct {
	Flavour        string         `json:"flavour"`
	Placement      string         `json:"device_placement"` // "contiguous" or "paged"
	Baseline       string         `json:"baseline_conf"`    // the baseline configuration string
	BaselineSource string         `json:"baseline_source"`  // where the baseline settings came from
	Confs          []string       `json:"alternatives"`
	Devices        []DeviceResult `json:"devices"`
}

// DeviceResult holds one device's recorded figures and simulated runs.
type DeviceResult struct {
	Device          int        `json:"device"`
	Input           InputStats `json:"input"`
	DeviceMem       int64      `json:"device_mem"`
	DeviceMemSource string     `json:"device_mem_source"`
	HasTimestamps   bool       `json:"has_timestamps"`
	// Until is the last trace entry the runs simulated (Options.Until;
	// entries − 1 when they ran to the end).
	Until    int      `json:"simulated_until"`
	Recorded Recorded `json:"recorded"`
	// FileDeviceMem is the device size the file implies (the oom entry's
	// reserved + free bytes, else the guess), whatever --device-mem says.
	FileDeviceMem       int64  `json:"file_device_mem"`
	FileDeviceMemSource string `json:"file_device_mem_source"`
	// Runs are the baseline (Runs[0]) and the alternatives in order.
	Runs []*Run `json:"runs"`
	// Reference is the baseline on FileDeviceMem when the runs use another
	// device size (--device-mem): the recording is reproduced, or not, on
	// its own device, and Trust is judged on it. nil otherwise.
	Reference *Run `json:"reference_baseline,omitempty"`
	// Fidelity compares the baseline's reserved curve with the recorded one.
	Fidelity Fidelity `json:"baseline_fidelity"`
	// Trust says whether the baseline reproduces the recording, and so
	// whether an alternative that runs without OOM may be called a fix
	// (Assess).
	Trust Trust `json:"trust"`
}

// InputStats counts what the input sequence was built from.
type InputStats struct {
	Entries int `json:"entries"`        // trace entries of the device
	Initial int `json:"initial_allocs"` // allocations live before the trace, allocated first
	// InitialBytes sums them; Ghosts and GhostBytes are those of them no
	// trace entry names (ghost blocks, docs/timeline.md rule (b)).
	InitialBytes  int64 `json:"initial_bytes"`
	Ghosts        int   `json:"ghost_blocks"`
	GhostBytes    int64 `json:"ghost_bytes"`
	Allocs        int   `json:"allocs"`
	Frees         int   `json:"frees"`
	DeferredFrees int   `json:"deferred_frees"` // free_requested … later free_completed: modelled with RecordStream
	OOMRequests   int   `json:"oom_requests"`   // recorded oom entries, retried as requests
	EmptyCaches   int   `json:"empty_caches"`   // empty_cache calls inferred from segment releases
	// Workspace counts torch_npu workspace blocks (workspace_snapshot,
	// segment_alloc, alloc triples): memory of another allocator, held on
	// the device for the whole run and counted as reserved and allocated.
	Workspace int `json:"workspace_blocks"`
	// Unmatched counts alloc/free entries the trace does not explain
	// (a free of an address that is not live, an alloc over a live one,
	// a negative size); they are skipped or resolved as the package doc
	// says.
	Unmatched int `json:"unmatched"`
}

// Recorded are the figures of the recorded trace (docs/timeline.md series).
type Recorded struct {
	PeakReserved  int64   `json:"peak_reserved"`
	PeakIndex     int     `json:"peak_index"`
	PeakActive    int64   `json:"peak_active"` // requested bytes, as the trace counts them
	SegmentAllocs int     `json:"segment_allocs"`
	SegmentFrees  int     `json:"segment_frees"`
	OOMs          int     `json:"ooms"`
	FirstOOM      *OOM    `json:"first_oom"`
	Reserved      []Point `json:"reserved"`
}

// Run is one simulated configuration.
type Run struct {
	Name               string `json:"name"` // "baseline" or the configuration string
	Conf               string `json:"conf"`
	Flavour            string `json:"flavour"`
	ExpandableSegments bool   `json:"expandable_segments"`
	MaxSplitSize       int64  `json:"max_split_size,omitempty"` // bytes; 0 = unlimited

	PeakReserved  int64 `json:"peak_reserved"`
	PeakIndex     int   `json:"peak_index"` // entry after which the peak is first reached (-1: start)
	PeakAllocated int64 `json:"peak_allocated"`
	FinalReserved int64 `json:"final_reserved"`
	// SegmentAllocs and SegmentFrees count device allocations and
	// releases during the trace (not those the initial allocations
	// needed): segment_alloc / segment_map and segment_free /
	// segment_unmap, as the trace would show them.
	SegmentAllocs int64 `json:"segment_allocs"`
	SegmentFrees  int64 `json:"segment_frees"`
	// CachedFreeAtPeak is reserved − allocated bytes when reserved first
	// reaches its peak (memory cached but not handed out);
	// CachedFreeFraction is that over the peak. Neither is the segment
	// map's free_fragmentation (docs/json.md).
	CachedFreeAtPeak   int64   `json:"cached_free_bytes_at_peak"`
	CachedFreeFraction float64 `json:"cached_free_fraction_at_peak"`
	AllocRetries       int64   `json:"alloc_retries"`
	OOMs               int     `json:"ooms"`
	FirstOOM           *OOM    `json:"first_oom"`
	FailedAllocs       int     `json:"failed_allocs"`     // recorded allocations this run could not make
	RecordedOOMsFit    int     `json:"recorded_ooms_fit"` // recorded oom requests that fit here
	// Verdict is the run's answer (Assess): VerdictReproduces or
	// VerdictDiffers for the baseline, else VerdictFits, VerdictFails or
	// VerdictUntrusted; "" when nothing was simulated.
	Verdict  string  `json:"verdict"`
	Reserved []Point `json:"reserved"`
}

// OOM locates an out-of-memory failure.
type OOM struct {
	Index  int   `json:"index"`   // trace entry (-1: while allocating the initial state)
	TimeUS int64 `json:"time_us"` // epoch µs of the entry; 0 when the file has no times
	Size   int64 `json:"size"`
	// Reserved and Allocated are the allocator's bytes at the failure
	// (simulated runs only).
	Reserved  int64  `json:"reserved,omitempty"`
	Allocated int64  `json:"allocated,omitempty"`
	Message   string `json:"message,omitempty"`
}

// Point is a change point of a reserved-bytes curve: from entry Index on
// (−1: the start), reserved memory is Bytes until the next point.
type Point struct {
	Index int   `json:"i"`
	Bytes int64 `json:"bytes"`
}

// Fidelity says how closely the baseline follows the recording: absolute
// differences of the reserved bytes at the start and after each entry,
// except entries inside a malloc (from its first segment event to its
// alloc or oom entry), where the recording shows steps the simulation only
// shows in net.
type Fidelity struct {
	Points      int     `json:"points"`
	MaxAbsDiff  int64   `json:"max_abs_diff"`
	MeanAbsDiff float64 `json:"mean_abs_diff"`
	// Relative is MeanAbsDiff over the recorded peak reserved.
	Relative float64 `json:"relative"`
	// PeakDiff and FinalDiff are simulated − recorded peak and final
	// reserved bytes; the final figure is exact in every file (the final
	// segments), even one without segment events.
	PeakDiff  int64 `json:"peak_diff"`
	FinalDiff int64 `json:"final_diff"`
	// RecordedSegmentEvents is false when the trace has no segment
	// events: the recorded curve is then flat at the final reserved bytes
	// and the comparison mostly measures that.
	RecordedSegmentEvents bool `json:"recorded_segment_events"`
	// CurvePinned is false when the recorded segment events are too few
	// to pin the recorded curve between the start and the end: none at
	// all, or fewer than half as many as the baseline needed (the trace
	// lost some — a late start, a ring buffer that dropped the oldest, a
	// skip_actions filter). Only FinalDiff is then trustworthy.
	CurvePinned bool `json:"curve_pinned"`
}

// At returns the curve's value after entry i.
func At(c []Point, i int) int64 {
	lo, hi := 0, len(c)
	for lo < hi { // first point with Index > i
		m := (lo + hi) / 2
		if c[m].Index <= i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0
	}
	return c[lo-1].Bytes
}

// BaselineConfig returns the configuration the recording ran with: the
// file's allocator_settings when present, else the flavour's defaults, and
// a line saying which. segment_map / segment_unmap entries are written only
// by expandable segments, so a trace that has them turns expandable
// segments on in the baseline whatever the settings say (torch_npu files
// have no allocator_settings at all); the line says so.
func BaselineConfig(s *snapshot.Snapshot, f config.Flavour) (config.Config, string) {
	cfg := config.ConfigFromSettings(s.Settings, f)
	maps := segmentMapEvents(s)
	st := s.Settings
	var src string
	if st == nil {
		src = "defaults (the file has no allocator_settings)"
	} else {
		key := st.ConfKey
		if key == "" {
			key = cfg.ConfKey()
		}
		src = fmt.Sprintf("the file's allocator_settings (%s=%q)", key, st.Conf)
	}
	if maps > 0 && !cfg.ExpandableSegments {
		cfg.ExpandableSegments = true
		if cfg.Raw == "" {
			cfg.Raw = "expandable_segments:True"
		} else {
			cfg.Raw += ",expandable_segments:True"
		}
		src += fmt.Sprintf(", with expandable_segments:True because the trace has %d segment_map/segment_unmap entries (only expandable segments write them)", maps)
	}
	return cfg, src
}

// segmentMapEvents counts the segment_map and segment_unmap entries of
// every device trace.
func segmentMapEvents(s *snapshot.Snapshot) int {
	n := 0
	for _, tr := range s.DeviceTraces {
		for i := range tr {
			if a := tr[i].Action; a == snapshot.ActionSegmentMap || a == snapshot.ActionSegmentUnmap {
				n++
			}
		}
	}
	return n
}

// FileFlavour is the flavour a capture's allocator had: torch_npu files are
// NPU, every other schema comes from PyTorch's CUDA allocator.
func FileFlavour(c *replay.Capture) config.Flavour {
	if c.Schema == replay.SchemaTorchNPU {
		return config.FlavourNPU
	}
	return config.FlavourCUDA
}

// ParseConf parses an alternative in the flavour's syntax.
func ParseConf(s string, f config.Flavour) (config.Config, error) {
	if f == config.FlavourCUDA {
		return config.ParseCUDAConfig(s)
	}
	return config.ParseConfig(s)
}
