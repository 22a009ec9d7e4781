package profiler

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Stats is the `npumon stats --json` summary of a profiler directory.
// Times are epoch µs, sizes bytes.
type Stats struct {
	Path          string       `json:"path"`
	Kind          string       `json:"kind"` // "profiler"
	Ops           int          `json:"ops"`
	FirstTimeUS   *int64       `json:"first_time_us"` // null when the source has no times
	LastTimeUS    *int64       `json:"last_time_us"`
	MemoryRecords int          `json:"memory_records"`
	TopOps        []OpStat     `json:"top_ops"`
	Devices       []DeviceStat `json:"devices"`
}

// OpStat aggregates ops of one name.
type OpStat struct {
	Name    string  `json:"name"`
	Count   int     `json:"count"`
	TotalUS float64 `json:"total_us"`
}

// DeviceStat holds a device's memory peaks.
type DeviceStat struct {
	Device             int    `json:"device"`
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  int64  `json:"peak_reserved_bytes"`
	PeakActiveBytes    *int64 `json:"peak_active_bytes"` // null where the source has no active column
}

// TopOpsN is how many op names Stats lists.
const TopOpsN = 10

// componentPreference orders the memory components a device's peaks are
// taken from: the torch caching allocator (PTA) first, which is what npumon
// models; other components only when a device has no PTA rows.
var componentPreference = []string{CompPTA, CompPTAGE, CompGE, CompWorkspace, CompAPP}

// PreferredComponent returns, per device, the memory records of the
// component npumon reads a device's totals from (componentPreference), in
// time order as d holds them.
func PreferredComponent(d *Data) map[int][]*MemoryRecord {
	byDev := map[int]map[string][]*MemoryRecord{}
	for i := range d.Memory {
		m := &d.Memory[i]
		if m.Device < 0 {
			continue
		}
		if byDev[m.Device] == nil {
			byDev[m.Device] = map[string][]*MemoryRecord{}
		}
		byDev[m.Device][m.Component] = append(byDev[m.Device][m.Component], m)
	}
	out := make(map[int][]*MemoryRecord, len(byDev))
	for dev, comps := range byDev {
		for _, c := range componentPreference {
			if rows := comps[c]; len(rows) > 0 {
				out[dev] = rows
				break
			}
		}
	}
	return out
}

// ComputeStats summarises d. ProfilerStep#N markers are steps, not ops:
// they are left out of ops and top_ops.
func ComputeStats(path string, d *Data) Stats {
	s := Stats{Path: path, Kind: "profiler", MemoryRecords: len(d.Memory), TopOps: []OpStat{}, Devices: []DeviceStat{}}
	var first, last int64
	have := false
	span := func(a, b int64) {
		if !have || a < first {
			first = a
		}
		if !have || b > last {
			last = b
		}
		have = true
	}
	agg := map[string]*OpStat{}
	totals := map[string]int64{}
	for i := range d.Ops {
		o := &d.Ops[i]
		if o.Timed() {
			span(o.StartNS, o.EndNS)
		}
		if o.IsStep {
			continue
		}
		s.Ops++
		a := agg[o.Name]
		if a == nil {
			a = &OpStat{Name: o.Name}
			agg[o.Name] = a
		}
		a.Count++
		totals[o.Name] += o.DurNS
	}
	for i := range d.Memory {
		span(d.Memory[i].TimeNS, d.Memory[i].TimeNS)
	}
	if have {
		f, l := floorDiv(first, 1000), floorDiv(last, 1000)
		s.FirstTimeUS, s.LastTimeUS = &f, &l
	}
	for name, a := range agg {
		a.TotalUS = float64(totals[name]) / 1000
		s.TopOps = append(s.TopOps, *a)
	}
	sort.Slice(s.TopOps, func(i, j int) bool {
		a, b := s.TopOps[i], s.TopOps[j]
		if totals[a.Name] != totals[b.Name] {
			return totals[a.Name] > totals[b.Name]
		}
		return a.Name < b.Name
	})
	if len(s.TopOps) > TopOpsN {
		s.TopOps = s.TopOps[:TopOpsN]
	}

	for dev, rows := range PreferredComponent(d) {
		ds := DeviceStat{Device: dev}
		for _, m := range rows {
			ds.PeakReservedBytes = max(ds.PeakReservedBytes, m.Reserved)
			if m.HasAllocated {
				ds.PeakAllocatedBytes = max(ds.PeakAllocatedBytes, m.Allocated)
			}
			if m.HasActive {
				if ds.PeakActiveBytes == nil {
					v := m.Active
					ds.PeakActiveBytes = &v
				} else {
					*ds.PeakActiveBytes = max(*ds.PeakActiveBytes, m.Active)
				}
			}
		}
		s.Devices = append(s.Devices, ds)
	}
	sort.Slice(s.Devices, func(i, j int) bool { return s.Devices[i].Device < s.Devices[j].Device })
	return s
}

// WriteStatsText prints s for people.
func WriteStatsText(w io.Writer, s *Stats, d *Data) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: profiler data (%s", s.Path, d.Source)
	switch {
	case d.Complete:
		b.WriteString(", complete)\n")
	case d.Source == SourceFramework:
		b.WriteString(", live: no profiler_info yet, times from this host's clocks)\n")
	default:
		b.WriteString(", no analyse.done)\n")
	}
	if s.FirstTimeUS != nil {
		f, l := *s.FirstTimeUS, *s.LastTimeUS
		fmt.Fprintf(&b, "time      %s → %s (%s)\n", fmtEpochUS(f), fmtEpochUS(l), time.Duration(l-f)*time.Microsecond)
	} else {
		b.WriteString("time      (no timestamps in this source)\n")
	}
	fmt.Fprintf(&b, "ops       %d (%d steps)\n", s.Ops, len(d.Steps))
	fmt.Fprintf(&b, "memory    %d records\n", s.MemoryRecords)
	for _, warn := range d.Warnings {
		fmt.Fprintf(&b, "warning   %s\n", warn)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(s.TopOps) > 0 {
		fmt.Fprintln(w, "\ntop ops by total time")
		fmt.Fprintln(tw, "count\ttotal ms\t  name")
		for _, o := range s.TopOps {
			fmt.Fprintf(tw, "%d\t%.3f\t  %s\n", o.Count, o.TotalUS/1000, o.Name)
		}
		tw.Flush()
	}
	if len(s.Devices) > 0 {
		fmt.Fprintln(w, "\nmemory peaks (MiB)")
		fmt.Fprintln(tw, "device\tallocated\treserved\tactive\t")
		for _, dv := range s.Devices {
			act := "-"
			if dv.PeakActiveBytes != nil {
				act = fmt.Sprintf("%.1f", float64(*dv.PeakActiveBytes)/MiB)
			}
			fmt.Fprintf(tw, "NPU:%d\t%.1f\t%.1f\t%s\t\n", dv.Device, float64(dv.PeakAllocatedBytes)/MiB,
				float64(dv.PeakReservedBytes)/MiB, act)
		}
		tw.Flush()
	}
	return nil
}

func fmtEpochUS(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.000000") + " UTC"
}
