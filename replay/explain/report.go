package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay/whatif"
)

func momentText(m Moment) string {
	s := fmt.Sprintf("%s: after entry %d", m.Spec, m.Index)
	if m.Index < 0 {
		s = m.Spec + ": before the first entry"
	}
	if m.TimeUS != nil {
		s += " " + timeText(*m.TimeUS)
	}
	return s
}

// timeText is an epoch-µs time as the local wall clock, the number after
// it: "(2026-12-01 17:40:35.856249, 1796146835856249 µs)".
func timeText(us int64) string {
	return fmt.Sprintf("(%s, %d µs)", time.UnixMicro(us).Format("2006-01-02 15:04:05.000000"), us)
}

func oldestText(g *Group) string {
	if g.OldestIndex < 0 {
		return "before trace"
	}
	return fmt.Sprintf("#%d", g.OldestIndex)
}

// WriteText prints the holders as a table.
func (h *Holders) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "%s device %d, %s\n", h.Path, h.Device, momentText(h.At))
	fmt.Fprintf(w, "%d live allocations, %s active, %s allocated; by %s\n\n", h.Allocations,
		bytesize.Torch(h.ActiveBytes), bytesize.Torch(h.AllocatedBytes), h.By)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BYTES\tSHARE\tCOUNT\tLARGEST\tOLDEST\tGROUP")
	for i := range h.Groups {
		g := &h.Groups[i]
		fmt.Fprintf(tw, "%s\t%.1f%%\t%d\t%s\t%s\t%s\n", bytesize.Torch(g.Bytes), 100*g.Share, g.Count,
			bytesize.Torch(g.LargestBytes), oldestText(g), g.Key)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(h.NoStack) > 0 {
		parts := make([]string, len(h.NoStack))
		for i, c := range h.NoStack {
			parts[i] = c.Key + " " + bytesize.Torch(c.Bytes)
		}
		fmt.Fprintf(w, "\n%s: allocations recorded without a stack (most were made before memory history was recorded); by category: %s\n",
			NoStackKey, strings.Join(parts, ", "))
	}
	return nil
}

// WriteText prints the diff as a table.
func (d *Diff) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "from %s device %d, %s: %s active\n", d.From.Path, d.From.Device, momentText(d.From.At), bytesize.Torch(d.From.ActiveBytes))
	fmt.Fprintf(w, "to   %s device %d, %s: %s active\n\n", d.To.Path, d.To.Device, momentText(d.To.At), bytesize.Torch(d.To.ActiveBytes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DELTA\tFROM\tTO\tCOUNT\tBORN\tFREED\tGROUP")
	for _, g := range d.Groups {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d→%d\t%d\t%d\t%s\n", signed(g.DeltaBytes), bytesize.Torch(g.BytesFrom),
			bytesize.Torch(g.BytesTo), g.CountFrom, g.CountTo, g.BornCount, g.FreedCount, g.Key)
	}
	return tw.Flush()
}

func signed(n int64) string {
	if n < 0 {
		return "-" + bytesize.Torch(-n)
	}
	return "+" + bytesize.Torch(n)
}

// WriteText prints the explanation.
func (e *Explanation) WriteText(w io.Writer) error {
	fmt.Fprintln(w, e.Path)
	for _, d := range e.Devices {
		fmt.Fprintf(w, "\ndevice %d\n", d.Device)
		for _, o := range d.OOMs {
			switch {
			case o.Kind == "oom":
				fmt.Fprintf(w, "\n  out of memory at entry %d", o.Index)
			case o.Index < 0 && !o.changes:
				fmt.Fprint(w, "\n  no oom entry; the trace holds no events: memory history was not being recorded")
			case o.Index < 0:
				fmt.Fprint(w, "\n  no oom entry; the active peak is at the start, before the trace's first entry (the trace only frees memory)")
			default:
				fmt.Fprintf(w, "\n  no oom entry; the active peak, after entry %d", o.Index)
			}
			if o.TimeUS != nil {
				fmt.Fprint(w, " "+timeText(*o.TimeUS))
			}
			fmt.Fprintln(w)
			if o.Kind == "oom" {
				fmt.Fprintf(w, "  verdict: %s\n    %s\n", o.Verdict, o.figures().Reason(o.RequestedBytes, o.deviceFree(), bytesize.Torch))
				if out := d.OutsideAllocator; out != nil {
					fmt.Fprintf(w, "    %s\n", out.Sentence(o.Verdict == "shortage", o.figures(), o.deviceFree(), bytesize.Torch))
				}
			} else if out := d.OutsideAllocator; out != nil {
				fmt.Fprintf(w, "  %s\n", out.Sentence(false, o.figures(), 0, bytesize.Torch))
			}
			if g := o.Grew; g != nil {
				since := "the start of the trace"
				if g.FromIndex >= 0 {
					since = fmt.Sprintf("the last step end (entry %d)", g.FromIndex)
				}
				fmt.Fprintf(w, "  grew most since %s: %s, %s (%s → %s)\n", since, g.Category,
					signed(g.BytesTo-g.BytesFrom), bytesize.Torch(g.BytesFrom), bytesize.Torch(g.BytesTo))
			}
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			if o.Index >= 0 {
				fmt.Fprintf(tw, "    requested\t%s\n", bytesize.Torch(o.RequestedBytes))
			}
			if o.DeviceFreeBytes != nil {
				fmt.Fprintf(tw, "    device free\t%s\n", bytesize.Torch(*o.DeviceFreeBytes))
			}
			fmt.Fprintf(tw, "    reserved\t%s\n", bytesize.Torch(o.ReservedBytes))
			fmt.Fprintf(tw, "    allocated\t%s\n", bytesize.Torch(o.AllocatedBytes))
			fmt.Fprintf(tw, "    cached free\t%s (largest block %s)\n", bytesize.Torch(o.CachedFreeBytes), bytesize.Torch(o.LargestCachedFreeBytes))
			if o.Op != "" {
				fmt.Fprintf(tw, "    op\t%s\n", o.Op)
			}
			tw.Flush()
			if len(o.Frames) > 0 {
				fmt.Fprintln(w, "    stack:")
				st := make(snapshot.Stack, len(o.Frames))
				for i, f := range o.Frames {
					st[i] = snapshot.Frame{Filename: f.Filename, Line: f.Line, Name: f.Name}
				}
				for _, l := range StackText(e.rules(), st, 0) {
					fmt.Fprintf(w, "      %s\n", l)
				}
			}
			if len(o.TopHolders) > 0 {
				fmt.Fprintln(w, "    top holders:")
				tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				for i := range o.TopHolders {
					g := &o.TopHolders[i]
					fmt.Fprintf(tw, "      %s\t%.1f%%\t%d\t%s\n", bytesize.Torch(g.Bytes), 100*g.Share, g.Count, g.Key)
				}
				tw.Flush()
			}
			if len(o.WhatIf) > 0 {
				fmt.Fprintln(w, "    what if:")
				tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				for _, r := range o.WhatIf {
					fmt.Fprintf(tw, "      %s\t%s\tpeak reserved %s\n", r.Conf, whatif.VerdictText(r.Verdict), bytesize.Torch(r.PeakReservedBytes))
				}
				tw.Flush()
			}
		}
		if d.WhatIfNote != "" {
			fmt.Fprintf(w, "  %s\n", d.WhatIfNote)
		}
		if t := d.WhatIfTrust; t != nil {
			fmt.Fprintf(w, "  what-if: %s\n", t.Text())
		}
		fmt.Fprintf(w, "\n  %s\n", d.StepsLine())
		switch {
		case d.Steps < MinLeakSteps:
			fmt.Fprintf(w, "  leak suspects: %d steps found, %d needed\n", d.Steps, MinLeakSteps)
		case len(d.LeakSuspects) == 0:
			fmt.Fprintf(w, "  leak suspects: none over %d steps\n", d.Steps)
		default:
			fmt.Fprintf(w, "  leak suspects over %d steps:\n", d.Steps)
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, l := range d.LeakSuspects {
				fmt.Fprintf(tw, "    %s/step\tover %d steps\t%s\n", signed(l.GrowthBytesPerStep), len(l.Steps), l.Key)
			}
			tw.Flush()
		}
	}
	return nil
}

// StepsLine says how many steps were found and from where, or why none
// were: "steps: 12 from the trace's repeat period".
func (d *DeviceExplanation) StepsLine() string {
	if d.Steps == 0 {
		if d.StepNote != "" {
			return "steps: none found (" + d.StepNote + ")"
		}
		return "steps: none found"
	}
	return fmt.Sprintf("steps: %d from %s", d.Steps, d.StepSource.Describe())
}
