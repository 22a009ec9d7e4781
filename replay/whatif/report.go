package whatif

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/npumon/npumon/allocator/bytesize"
)

// Columns are the headings of Table.
var Columns = []string{"run", "peak reserved", "peak allocated", "segments +/-", "cached free at peak", "retries", "OOM"}

// Table returns one row per run, the recorded trace first, with the
// figures as the text report and the TUI show them.
func (d *DeviceResult) Table() [][]string {
	const none = "—"
	rec := d.Recorded
	rows := [][]string{{
		"recorded", bytesize.Torch(rec.PeakReserved), none,
		fmt.Sprintf("%d/%d", rec.SegmentAllocs, rec.SegmentFrees), none, none, oomCell(rec.FirstOOM, rec.OOMs, 0),
	}}
	for _, r := range d.Runs {
		rows = append(rows, []string{
			r.Name, bytesize.Torch(r.PeakReserved), bytesize.Torch(r.PeakAllocated),
			fmt.Sprintf("%d/%d", r.SegmentAllocs, r.SegmentFrees),
			fmt.Sprintf("%s (%.1f%%)", bytesize.Torch(r.CachedFreeAtPeak), 100*r.CachedFreeFraction),
			fmt.Sprint(r.AllocRetries), runOOMCell(r),
		})
	}
	return rows
}

// runOOMCell is a run's OOM cell: an alternative that runs without OOM
// while the baseline does not reproduce the recording is no fix, and a
// baseline that fits the recorded OOM does not reproduce it; the cell says
// so.
func runOOMCell(r *Run) string {
	switch {
	case r.Verdict == VerdictUntrusted:
		return "none (not a fix: no reproduction)"
	case r.Verdict == VerdictDiffers && r.FirstOOM == nil && r.RecordedOOMsFit > 0:
		return "none (the recorded OOM fits: no reproduction)"
	}
	return oomCell(r.FirstOOM, r.OOMs, r.RecordedOOMsFit)
}

func oomCell(o *OOM, n, fit int) string {
	if o == nil {
		if fit > 0 {
			return "none (recorded OOM fits)"
		}
		return "none"
	}
	s := fmt.Sprintf("entry %d (%s)", o.Index, bytesize.Torch(o.Size))
	if o.Index < 0 {
		s = fmt.Sprintf("initial state (%s)", bytesize.Torch(o.Size))
	}
	if n > 1 {
		s += fmt.Sprintf(" +%d more", n-1)
	}
	return s
}

// FidelityLine says in one sentence how far the baseline follows the
// recording.
func (d *DeviceResult) FidelityLine() string {
	if len(d.Runs) == 0 {
		return "baseline fidelity: nothing simulated"
	}
	f := d.Fidelity
	s := fmt.Sprintf("baseline fidelity: reserved curve max |Δ| %s, mean |Δ| %s over %d points (%.2f%% of the recorded peak); peak Δ %s, final Δ %s",
		bytesize.Torch(f.MaxAbsDiff), bytesize.Torch(int64(f.MeanAbsDiff+0.5)), f.Points, 100*f.Relative,
		signedSize(f.PeakDiff), signedSize(f.FinalDiff))
	switch {
	case !f.RecordedSegmentEvents:
		s += " (the trace has no segment events, so the recorded curve is flat at the final reserved bytes: trust only the final Δ)"
	case !f.CurvePinned:
		s += fmt.Sprintf(" (the trace has only %d segment events where the baseline needed %d, so the recorded curve between them is not pinned: trust only the final Δ)",
			d.Recorded.SegmentAllocs+d.Recorded.SegmentFrees, d.Runs[0].SegmentAllocs+d.Runs[0].SegmentFrees)
	}
	return s
}

func signedSize(n int64) string {
	if n < 0 {
		return "-" + bytesize.Torch(-n)
	}
	return "+" + bytesize.Torch(n)
}

var placementText = map[string]string{
	"contiguous": "contiguous (each device allocation needs one free range, as on npumon's simulated Ascend device)",
	"paged":      "paged (only the byte count limits device allocations)",
}

// WriteText prints the report: per device the input, the device size, the
// table of runs and the baseline fidelity.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "allocator flavour: %s\nbaseline settings: %s\ndevice model: %s\n", r.Flavour, r.BaselineSource, placementText[r.Placement])
	for i := range r.Devices {
		d := &r.Devices[i]
		in := d.Input
		fmt.Fprintf(&b, "\ndevice %d: %d entries — %d allocations live at the start, %d allocs, %d frees (%d deferred), %d oom requests, %d empty_cache calls",
			d.Device, in.Entries, in.Initial, in.Allocs, in.Frees, in.DeferredFrees, in.OOMRequests, in.EmptyCaches)
		if in.Workspace > 0 {
			fmt.Fprintf(&b, ", %d workspace blocks", in.Workspace)
		}
		if in.Unmatched > 0 {
			fmt.Fprintf(&b, ", %d unmatched entries", in.Unmatched)
		}
		if !d.Trust.Simulated {
			fmt.Fprintf(&b, "\n%s\n", d.TrustLine())
			continue
		}
		fmt.Fprintf(&b, "\ndevice memory: %s, %s\n\n", bytesize.Torch(d.DeviceMem), d.DeviceMemSource)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(Columns, "\t"))
		for _, row := range d.Table() {
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()
		fmt.Fprintf(&b, "\n%s\n%s\n", d.FidelityLine(), d.TrustLine())
		for _, run := range d.Runs {
			if o := run.FirstOOM; o != nil {
				fmt.Fprintf(&b, "%s: at the first OOM %s reserved, %s allocated\n", run.Name,
					bytesize.Torch(o.Reserved), bytesize.Torch(o.Allocated))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
