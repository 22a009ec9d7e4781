package whatif

import (
	"fmt"
	"strings"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/config"
	"github.com/npumon/npumon/allocator/snapshot"
)

// Run verdicts (Run.Verdict).
const (
	// VerdictReproduces and VerdictDiffers mark the baseline run, the
	// yardstick: whether it reproduces the recording (Trust.Reproduces).
	VerdictReproduces = "reproduces"
	VerdictDiffers    = "does_not_reproduce"
	// VerdictFits: the run makes every recorded allocation and oom request,
	// and the baseline reproduces the recording, so this is a fix.
	VerdictFits = "fits"
	// VerdictFails: the run runs out of memory or fails an allocation.
	VerdictFails = "still_fails"
	// VerdictUntrusted: the run makes every request, but the baseline does
	// not reproduce the recording, so that says nothing about the real run.
	VerdictUntrusted = "no_oom_untrusted"
)

// PeakTolerance is how far (a share of the recorded peak reserved bytes)
// the baseline's peak may be from the recorded one and still reproduce it.
const PeakTolerance = 0.10

// Trust is the baseline's standing against the recording: the figures it is
// judged on, what does not match and what in the file may explain that.
type Trust struct {
	// Simulated is false when the device's trace holds nothing to simulate
	// (no allocation and no oom request); Mismatch then says so and there
	// are no runs.
	Simulated bool `json:"simulated"`
	// Reproduces is true when nothing is in Mismatch: only then is an
	// alternative without OOM called a fix (VerdictFits).
	Reproduces            bool  `json:"reproduces"`
	RecordedPeakReserved  int64 `json:"recorded_peak_reserved"`
	SimulatedPeakReserved int64 `json:"simulated_peak_reserved"`
	// PeakCompared names the figure the peaks were compared on: "peak" when
	// the recorded curve is pinned by segment events, else "final" (the
	// final reserved bytes, exact in every file).
	PeakCompared string `json:"peak_compared"`
	// RecordedOOMIndex is the first recorded oom entry, nil when the
	// device has none; ReproducesOOM is then nil too, else whether the
	// baseline's first failure is that entry.
	RecordedOOMIndex *int  `json:"recorded_oom_index"`
	ReproducesOOM    *bool `json:"reproduces_recorded_oom"`
	// DeviceMem is the device size the baseline was judged on: the file's
	// (FileDeviceMem, DeviceResult.Reference) when --device-mem gives
	// another.
	DeviceMem int64 `json:"judged_on_device_mem"`
	// OnFileDevice is true when that is not the runs' device.
	OnFileDevice bool `json:"judged_on_file_device"`
	// Mismatch lists how the baseline differs from the recording; Causes
	// what the file shows that the simulation cannot know, the likely
	// reasons. Both are empty when it reproduces.
	Mismatch []Reason `json:"mismatch"`
	Causes   []Reason `json:"causes"`
}

// Reason is one mismatch or cause: a stable code and its sentence.
type Reason struct {
	Code string `json:"code"`
	Text string `json:"text"`
}

// Mismatch codes.
const (
	ReasonNoAllocations  = "no_allocations"         // nothing to simulate
	ReasonBaselineFits   = "baseline_fits_oom"      // the baseline fits where the run ran out
	ReasonBaselineEarly  = "baseline_fails_earlier" // the baseline runs out before the recorded oom
	ReasonBaselineFails  = "baseline_fails"         // the baseline runs out where the run did not
	ReasonPeakDiffers    = "peak_differs"           // the peaks differ by more than PeakTolerance
	CauseMissingHistory  = "missing_history"        // allocations made before recording
	CauseGhostBlocks     = "ghost_blocks"           // live blocks no entry names
	CauseLostEvents      = "lost_segment_events"    // the trace lost segment events
	CauseUnknownDevice   = "unknown_device_size"    // the device size is guessed
	CauseUnmatched       = "unmatched_entries"      // entries the trace does not explain
	deviceMemGuessPrefix = "guessed"
)

// NothingToSimulate reports whether in holds nothing a simulation would
// replay.
func NothingToSimulate(in InputStats) bool { return in.Allocs == 0 && in.OOMRequests == 0 }

// Assess judges d's baseline against the recording and sets d.Trust and
// every run's Verdict. Simulate calls it; it is the one place a what-if
// answer is called a fix.
func Assess(d *DeviceResult) {
	t := Trust{RecordedPeakReserved: d.Recorded.PeakReserved, Mismatch: []Reason{}, Causes: []Reason{}}
	if o := d.Recorded.FirstOOM; o != nil {
		i := o.Index
		t.RecordedOOMIndex = &i
	}
	if NothingToSimulate(d.Input) || len(d.Runs) == 0 {
		t.Mismatch = append(t.Mismatch, Reason{ReasonNoAllocations, fmt.Sprintf(
			"nothing to simulate: the trace (%d entries) holds no allocation and no oom request (memory history was not being recorded while the program allocated)",
			d.Input.Entries)})
		d.Trust = t
		return
	}
	t.Simulated = true
	base := d.Runs[0]
	t.DeviceMem = d.DeviceMem
	if d.Reference != nil { // the recording is judged on its own device
		base, t.DeviceMem, t.OnFileDevice = d.Reference, d.FileDeviceMem, true
	}
	ranOut := base.OOMs > 0 || base.FailedAllocs > 0
	if ro := d.Recorded.FirstOOM; ro != nil {
		ok := base.FirstOOM != nil && base.FirstOOM.Index == ro.Index
		t.ReproducesOOM = &ok
		switch {
		case ok:
		case base.FirstOOM == nil || base.FirstOOM.Index > ro.Index:
			t.Mismatch = append(t.Mismatch, Reason{ReasonBaselineFits, fmt.Sprintf(
				"the baseline fits the %s request where the recorded run ran out of memory (entry %d)", bytesize.Torch(ro.Size), ro.Index)})
		default:
			t.Mismatch = append(t.Mismatch, Reason{ReasonBaselineEarly, fmt.Sprintf(
				"the baseline runs out of memory at entry %d, before the recorded OOM at entry %d", base.FirstOOM.Index, ro.Index)})
		}
	} else if ranOut {
		at := "while allocating the initial state"
		if base.FirstOOM != nil && base.FirstOOM.Index >= 0 {
			at = fmt.Sprintf("at entry %d", base.FirstOOM.Index)
		}
		t.Mismatch = append(t.Mismatch, Reason{ReasonBaselineFails, "the baseline runs out of memory " + at + " where the recorded run did not"})
	}
	// The runs may end early (Options.Until): compare with the recording up
	// to the same entry.
	rec, sim, what := peakThrough(d.Recorded.Reserved, d.Until), base.PeakReserved, "peak"
	if !d.Fidelity.CurvePinned {
		// Without segment events the recorded curve is flat at the final
		// reserved bytes: compare those, the one exact recorded figure.
		what = "final"
		sim = base.FinalReserved
		rec = At(d.Recorded.Reserved, d.Until)
	}
	t.PeakCompared = what
	t.RecordedPeakReserved, t.SimulatedPeakReserved = rec, sim
	if diff := sim - rec; abs(diff) > max(int64(PeakTolerance*float64(rec)), 2*config.MiB) {
		pct := 0.0
		if rec > 0 {
			pct = 100 * float64(sim) / float64(rec)
		}
		t.Mismatch = append(t.Mismatch, Reason{ReasonPeakDiffers, fmt.Sprintf(
			"the baseline's %s reserved is %s, %.0f%% of the recorded %s", what, bytesize.Torch(sim), pct, bytesize.Torch(rec))})
	}
	t.Reproduces = len(t.Mismatch) == 0
	if !t.Reproduces {
		t.Causes = causes(d, &t)
	}
	d.Trust = t
	for i, r := range d.Runs {
		switch {
		case i == 0 && t.Reproduces:
			r.Verdict = VerdictReproduces
		case i == 0:
			r.Verdict = VerdictDiffers
		case r.OOMs > 0 || r.FailedAllocs > 0:
			r.Verdict = VerdictFails
		case t.Reproduces:
			r.Verdict = VerdictFits
		default:
			r.Verdict = VerdictUntrusted
		}
	}
}

// causes lists what in d's file the simulation cannot know.
func causes(d *DeviceResult, t *Trust) []Reason {
	in := d.Input
	out := []Reason{}
	if in.Initial > 0 {
		out = append(out, Reason{CauseMissingHistory, fmt.Sprintf(
			"missing history: %d allocations (%s) were made before recording began; the simulation places them first, in address order, not where and when the program made them",
			in.Initial, bytesize.Torch(in.InitialBytes))})
	}
	if in.Ghosts > 0 {
		out = append(out, Reason{CauseGhostBlocks, fmt.Sprintf(
			"ghost blocks: %d of them (%s) are live in the final segments and named by no trace entry", in.Ghosts, bytesize.Torch(in.GhostBytes))})
	}
	if !d.Fidelity.CurvePinned && len(d.Runs) > 0 {
		out = append(out, Reason{CauseLostEvents, fmt.Sprintf(
			"the trace has %d segment events where the baseline needed %d: the recorded reserved curve is not known between the start and the end",
			d.Recorded.SegmentAllocs+d.Recorded.SegmentFrees, d.Runs[0].SegmentAllocs+d.Runs[0].SegmentFrees)})
	}
	switch {
	case strings.HasPrefix(d.FileDeviceMemSource, deviceMemGuessPrefix):
		out = append(out, Reason{CauseUnknownDevice, "unknown device size: " + d.FileDeviceMemSource})
	case t.ReproducesOOM != nil && !*t.ReproducesOOM && t.Mismatch[0].Code == ReasonBaselineFits:
		out = append(out, Reason{CauseUnknownDevice, fmt.Sprintf(
			"unknown device size: the allocator may have had less than the simulated %s (%s): the runtime's own reservation, other processes, memory outside the caching allocator",
			bytesize.Torch(t.DeviceMem), d.FileDeviceMemSource)})
	}
	if in.Unmatched > 0 {
		out = append(out, Reason{CauseUnmatched, fmt.Sprintf("%d trace entries are not explained by the rest of the trace (a free of an address not live, an alloc over a live one)", in.Unmatched)})
	}
	return out
}

// peakThrough is the curve's highest value up to entry last.
func peakThrough(c []Point, last int) int64 {
	var peak int64
	for _, p := range c {
		if p.Index > last {
			break
		}
		peak = max(peak, p.Bytes)
	}
	return peak
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// TrustLine is d.Trust.Text().
func (d *DeviceResult) TrustLine() string { return d.Trust.Text() }

// Text says in one sentence whether the simulation reproduces the
// recording and, when it does not, why: the words the text report, explain
// and the TUI print.
func (t *Trust) Text() string {
	if !t.Simulated {
		return reasonTexts(t.Mismatch)
	}
	if t.Reproduces {
		peak := fmt.Sprintf("%s reserved %s (recorded %s)", t.PeakCompared,
			bytesize.Torch(t.SimulatedPeakReserved), bytesize.Torch(t.RecordedPeakReserved))
		if t.OnFileDevice {
			peak += fmt.Sprintf(", on the file's own device of %s", bytesize.Torch(t.DeviceMem))
		}
		if t.ReproducesOOM != nil {
			return fmt.Sprintf("the baseline reproduces this run: it runs out at the recorded OOM (entry %d), %s; an alternative that fits is a fix",
				*t.RecordedOOMIndex, peak)
		}
		return "the baseline reproduces this run: no OOM, " + peak + "; compare the alternatives with it"
	}
	s := "the simulation does not reproduce this run, so no alternative is called a fix: " + reasonTexts(t.Mismatch)
	if t.OnFileDevice {
		s += fmt.Sprintf(" (on the file's own device of %s)", bytesize.Torch(t.DeviceMem))
	}
	if len(t.Causes) > 0 {
		s += ". Why: " + reasonTexts(t.Causes)
	}
	return s
}

func reasonTexts(rs []Reason) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Text
	}
	return strings.Join(parts, "; ")
}

// VerdictText is a run verdict in words, as the text report, explain and
// the TUI print it.
func VerdictText(v string) string {
	switch v {
	case VerdictFits:
		return "fits"
	case VerdictFails:
		return "still fails"
	case VerdictUntrusted:
		return "no OOM, not a fix (the simulation does not reproduce this run)"
	case VerdictReproduces:
		return "reproduces the recording"
	case VerdictDiffers:
		return "does not reproduce the recording"
	}
	return v
}

// minMaxSplitMB is the allocator's smallest max_split_size_mb.
const minMaxSplitMB = 20

// Alternatives are the configurations a what-if tries when none is named:
// the one set `npumon whatif`, `npumon explain` and the TUI's what-if view
// all use. expandable_segments:True, and max_split_size_mb of half the
// first recorded oom request on the devices (nil: all), so that cached
// blocks that large are never split by smaller requests; without an oom,
// half the largest allocation request; at least 20 (the allocator's
// minimum).
func Alternatives(s *snapshot.Snapshot, devices []int) []string {
	mb := max(sizeFor(s, devices)/2/config.MiB, minMaxSplitMB)
	return []string{"expandable_segments:True", fmt.Sprintf("max_split_size_mb:%d", mb)}
}

// sizeFor is the first oom entry's size on the devices, else the largest
// alloc entry's.
func sizeFor(s *snapshot.Snapshot, devices []int) int64 {
	if devices == nil {
		devices = s.Devices()
	}
	var largest int64
	for _, dev := range devices {
		if dev < 0 || dev >= len(s.DeviceTraces) {
			continue
		}
		for i := range s.DeviceTraces[dev] {
			switch e := &s.DeviceTraces[dev][i]; e.Action {
			case snapshot.ActionOOM:
				return e.Size
			case snapshot.ActionAlloc:
				largest = max(largest, e.Size)
			}
		}
	}
	return largest
}
