package explain

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/npumon/npumon/allocator/bytesize"
	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/crash"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/frames"
	"github.com/npumon/npumon/replay/memusage"
	"github.com/npumon/npumon/replay/whatif"
)

// Explanation is `npumon explain --json`.
type Explanation struct {
	Path    string              `json:"path"`
	Devices []DeviceExplanation `json:"devices"`

	frames *frames.Rules // the frame rules its groups used (nil: the default)
}

func (e *Explanation) rules() *frames.Rules {
	if e.frames == nil {
		return &frames.Rules{}
	}
	return e.frames
}

// DeviceExplanation is one device's answer: every oom entry (or the peak
// when there is none) explained, and the leak suspects across its steps.
type DeviceExplanation struct {
	Device int `json:"device"`
	Steps  int `json:"steps"` // step boundaries found
	// StepSource is where they came from (profiler, annotation,
	// optimizer, period; "" when none); StepNote why none, when none.
	StepSource   StepSource    `json:"step_source"`
	StepNote     string        `json:"step_note,omitempty"`
	OOMs         []OOM         `json:"ooms"`
	LeakSuspects []LeakSuspect `json:"leak_suspects"`
	WhatIfNote   string        `json:"whatif_note,omitempty"` // why no what-if ran, when none did
	// WhatIfTrust is the what-if's baseline against the recording
	// (whatif.Trust); absent when no what-if ran.
	WhatIfTrust *whatif.Trust `json:"whatif_trust,omitempty"`
	// OutsideAllocator is the device memory held outside the caching
	// allocator, by module, from the memUsageInfo CSV paired with the
	// snapshot (Options.MemUsage); absent without one.
	OutsideAllocator *Outside `json:"outside_allocator,omitempty"`
}

// Outside is one memUsageInfo CSV as explain reports it: the memory each
// module of the software stack (HCCL, the runtime, …) held on the device
// when torch_npu dumped the snapshot.
type Outside struct {
	File       string            `json:"file"`
	TotalBytes int64             `json:"total_bytes"` // Σ the modules' current bytes
	Modules    []memusage.Module `json:"modules"`     // as the file lists them
	// OffsetS is the CSV's name stamp minus the snapshot's, in seconds
	// (memusage.SnapshotStamp); null when the snapshot's is not known.
	OffsetS *int64 `json:"offset_s"`
}

// NewOutside is f as explain reports it; snapshot is the snapshot's path
// (for the offset; "" for none).
func NewOutside(f *memusage.File, snapshot string) *Outside {
	o := &Outside{File: f.Path, TotalBytes: f.Total(), Modules: f.Modules}
	if o.Modules == nil {
		o.Modules = []memusage.Module{}
	}
	if at, ok := memusage.SnapshotStamp(snapshot); ok && snapshot != "" && !f.Stamp.IsZero() {
		d := int64(f.Stamp.Sub(at).Seconds())
		o.OffsetS = &d
	}
	return o
}

// Sentence says how much of the device the modules hold, which and where
// the figures are from; for a shortage (f the oom's figures) it places
// them beside the verdict's figures: the device memory beyond reserved +
// free is not the allocator's to give. size writes a byte count.
func (o *Outside) Sentence(shortage bool, f Figures, deviceFree int64, size func(int64) string) string {
	file := "the memUsageInfo CSV"
	if o.File != "" {
		file = filepath.Base(o.File)
	}
	if o.OffsetS != nil && *o.OffsetS != 0 {
		file += fmt.Sprintf(", %s the snapshot", offsetText(*o.OffsetS))
	}
	mf := memusage.File{Modules: o.Modules}
	mods := mf.Summary(6, size)
	if o.TotalBytes == 0 {
		return fmt.Sprintf("no memory is held outside the caching allocator by module (%s)", file)
	}
	s := fmt.Sprintf("%s of the device is held outside the caching allocator (%s): %s", size(o.TotalBytes), file, mods)
	if shortage {
		s = fmt.Sprintf("the device's memory beyond the %s reserved and %s free is not the allocator's to give: ",
			size(f.Reserved), size(deviceFree)) + s
	}
	return s
}

// offsetText is "3 s after", "2 min before" (Span, the one way a gap
// between dumps is said).
func offsetText(s int64) string {
	dir := "after"
	if s < 0 {
		dir, s = "before", -s
	}
	return Span(time.Duration(s)*time.Second) + " " + dir
}

// OOM explains one failed allocation (Kind "oom") or, in a trace without
// one, the active peak (Kind "peak": no request failed, Verdict "none").
type OOM struct {
	Kind   string `json:"kind"`
	Index  int    `json:"index"`
	TimeUS *int64 `json:"time_us"`
	// RequestedBytes is the oom entry's size (the rounded request); for a
	// peak, the size of the allocation that reached it.
	RequestedBytes int64 `json:"requested_bytes"`
	// DeviceFreeBytes is what the device reported free (oom entries only).
	DeviceFreeBytes        *int64 `json:"device_free_bytes"`
	ReservedBytes          int64  `json:"reserved_bytes"`
	AllocatedBytes         int64  `json:"allocated_bytes"`
	CachedFreeBytes        int64  `json:"inactive_bytes"`
	LargestCachedFreeBytes int64  `json:"largest_free_block_bytes"`
	// Verdict: "shortage" when allocated + requested exceed reserved +
	// device free (the device cannot give that much), else
	// "fragmentation" (the bytes exist, no block or range is large
	// enough); "none" for a peak.
	Verdict    string  `json:"verdict"`
	Op         string  `json:"op"`
	Frames     []Frame `json:"frames"`
	TopHolders []Group `json:"top_holders"`
	// Grew is the memory category (replay/category) whose live bytes grew
	// most since the last step end before the entry, or since the start
	// of the trace without one; null when none grew.
	Grew   *CategoryGrowth `json:"grew"`
	WhatIf []WhatIfRun     `json:"whatif"`

	changes bool // some entry of the trace changes the active bytes
}

// CategoryGrowth is one category's live bytes at two moments.
type CategoryGrowth struct {
	Category  string `json:"category"`
	FromIndex int    `json:"from_index"` // the earlier moment: a step end's entry, -1 for the start
	BytesFrom int64  `json:"bytes_from"`
	BytesTo   int64  `json:"bytes_to"`
}

// grewMost is the category whose bytes grew most from base to now (ties:
// by name), nil when none grew.
func grewMost(base, now map[string]int64, from int) *CategoryGrowth {
	var best *CategoryGrowth
	for k, v := range now {
		d := v - base[k]
		if d <= 0 {
			continue
		}
		if best == nil || d > best.BytesTo-best.BytesFrom || (d == best.BytesTo-best.BytesFrom && k < best.Category) {
			best = &CategoryGrowth{Category: k, FromIndex: from, BytesFrom: base[k], BytesTo: v}
		}
	}
	return best
}

// figures are the state figures of o.
func (o *OOM) figures() Figures {
	return Figures{Reserved: o.ReservedBytes, Allocated: o.AllocatedBytes, CachedFree: o.CachedFreeBytes, LargestCachedFree: o.LargestCachedFreeBytes}
}

// deviceFree is what the device reported free, 0 where unknown.
func (o *OOM) deviceFree() int64 {
	if o.DeviceFreeBytes == nil {
		return 0
	}
	return *o.DeviceFreeBytes
}

// WhatIfRun is one configuration's answer for a device: does the recorded
// trace, its oom requests included, run without an out-of-memory error? On
// a device with oom entries the runs end at the last one explained: what
// the program did after failing would not have happened had it fitted.
type WhatIfRun struct {
	Conf string `json:"conf"` // "baseline": the recording's own settings
	// Fits is true only for a fix: the run makes every request and the
	// baseline reproduces the recording (Verdict "fits").
	Fits bool `json:"fits"`
	// Verdict is the what-if's (whatif.Run.Verdict): reproduces or
	// does_not_reproduce for the baseline, else fits, still_fails or
	// no_oom_untrusted.
	Verdict           string `json:"verdict"`
	PeakReservedBytes int64  `json:"peak_reserved_bytes"`
}

// Options tune Explain.
type Options struct {
	By    By  // leak suspects and top holders; "" = callsite
	Top   int // top holders per oom; 0 = 5
	Ops   []oprange.Op
	Confs []string // alternatives; nil = whatif.Alternatives (the TUI's and whatif's too)
	// NoWhatIf skips the simulation; so does a nil Simulate.
	NoWhatIf bool
	// WhatIf runs the simulation even where it answers nothing (no oom
	// entry, no peak within NearDevice of DeviceMem); NoWhatIf wins.
	WhatIf bool
	// Simulate runs the what-if (sim.Simulate from replay/whatif/sim).
	Simulate  whatif.Simulator
	DeviceMem int64 // simulated device bytes for the what-if; 0 = from the file
	Device    *int  // nil: every device
	// MaxOOMs bounds the oom entries explained per device (each costs an
	// undo walk); 0 = 16.
	MaxOOMs int
	Library func(*Grouper) // adjusts each grouper (e.g. a library regex)
	// MemUsage are the memUsageInfo CSVs paired with the snapshot
	// (memusage.ReadBeside), one per device at most: each device's
	// explanation reports its file (OutsideAllocator) and the oom
	// verdict's text names the modules' figures.
	MemUsage []*memusage.File
}

// Explain answers for every device of c.
func Explain(ctx context.Context, c *replay.Capture, opts Options) (*Explanation, error) {
	if opts.By == "" {
		opts.By = ByCallsite
	}
	if opts.Top <= 0 {
		opts.Top = 5
	}
	if opts.MaxOOMs <= 0 {
		opts.MaxOOMs = 16
	}
	devices := c.Snapshot.Devices()
	if opts.Device != nil {
		if !slices.Contains(devices, *opts.Device) {
			return nil, fmt.Errorf("device %d is not in this snapshot (devices: %v)", *opts.Device, devices)
		}
		devices = []int{*opts.Device}
	}
	out := &Explanation{Path: c.Path, Devices: []DeviceExplanation{}}
	if opts.Library != nil {
		g := &Grouper{}
		opts.Library(g)
		out.frames = g.Rules()
	}
	// The what-if runs (the costliest part) start before the per-device
	// walks and overlap them — where they answer something: an oom entry, or on
	// request (WhatIf, Confs). A peak near a given device size is only known
	// after the walks; the runs then start there.
	type simResult struct {
		res *whatif.Result
		err error
	}
	sim := make(chan simResult, 1)
	canSim := !opts.NoWhatIf && opts.Simulate != nil && len(devices) > 0
	// Each device's scan finds its oom entries, which the what-if needs
	// before it starts (it ends at the last one explained): one pass over
	// the trace that the explanation reads again, not a second one.
	until := map[int]int{}
	devs := make([]*Device, len(devices))
	scans := make([]traceScan, len(devices))
	for k, dev := range devices {
		d, err := NewDevice(c, dev, opts.Ops)
		if err != nil {
			return nil, err
		}
		devs[k], scans[k] = d, scanTrace(d.Timeline)
		if n := min(len(scans[k].ooms), opts.MaxOOMs); n > 0 {
			until[dev] = scans[k].ooms[n-1]
		}
	}
	startSim := func() {
		confs := opts.Confs
		if confs == nil {
			confs = whatif.Alternatives(c.Snapshot, devices)
		}
		go func() {
			defer crash.Recover()
			res, err := opts.Simulate(ctx, c, whatif.Options{Confs: confs, DeviceMem: opts.DeviceMem, Devices: devices, Until: until})
			sim <- simResult{res, err}
		}()
	}
	started := canSim && (opts.WhatIf || opts.Confs != nil || len(until) > 0)
	if started {
		startSim()
	}
	var peak int64 // the largest recorded peak reserved of the devices
	for k, dev := range devices {
		d := devs[k]
		de := d.explain(opts, scans[k])
		for _, f := range opts.MemUsage {
			if f != nil && f.Device == dev {
				de.OutsideAllocator = NewOutside(f, c.Path)
				break
			}
		}
		peak = max(peak, d.peakReserved) // PeakReserved, from explain's scan
		out.Devices = append(out.Devices, de)
	}
	if canSim && !started {
		if opts.DeviceMem > 0 && float64(peak) >= NearDevice*float64(opts.DeviceMem) {
			startSim()
			started = true
		} else {
			why := "no oom entry"
			if opts.DeviceMem > 0 {
				why = fmt.Sprintf("no oom entry, and the recorded peak reserved %s is under %.0f%% of --device-mem %s",
					bytesize.Torch(peak), 100*NearDevice, bytesize.Torch(opts.DeviceMem))
			}
			for i := range out.Devices {
				out.Devices[i].WhatIfNote = "what-if not run: " + why + " (--whatif runs it)"
			}
		}
	}
	if !started {
		close(sim)
	}
	r, ok := <-sim
	switch {
	case !ok:
	case r.err != nil:
		for i := range out.Devices {
			out.Devices[i].WhatIfNote = "what-if not run: " + r.err.Error()
		}
	default:
		for i := range out.Devices {
			out.Devices[i].WhatIfTrust = &r.res.Devices[i].Trust
			runs := whatIfRuns(&r.res.Devices[i])
			for j := range out.Devices[i].OOMs {
				out.Devices[i].OOMs[j].WhatIf = runs
			}
		}
	}
	return out, nil
}

// NearDevice is the share of the given device size (Options.DeviceMem) at
// which a recorded peak without an oom entry is near it: from there the
// what-if runs without being asked, to say whether the alternatives keep
// the run on the device and with how much room.
const NearDevice = 0.9

// traceScan is what explain reads off a trace in one pass: the oom
// entries (OOMIndices) and the reserved series right after each, the
// active series' peak (PeakIndex) and the reserved series there, and the
// reserved series' largest value (PeakReserved).
type traceScan struct {
	ooms         []int
	oomReserved  []int64
	peak         int
	peakReserved int64
	maxReserved  int64
}

func scanTrace(tl *replay.Timeline) traceScan {
	v, peak, r := tl.ActiveAtStart, tl.ActiveAtStart, tl.ReservedAtStart
	s := traceScan{peak: -1, peakReserved: r, maxReserved: r}
	for i := range tl.Entries {
		e := &tl.Entries[i]
		v += replay.ActiveDelta(e)
		r += replay.ReservedDelta(e)
		if v > peak {
			peak, s.peak, s.peakReserved = v, i, r
		}
		s.maxReserved = max(s.maxReserved, r)
		if e.Action == snapshot.ActionOOM {
			s.ooms = append(s.ooms, i)
			s.oomReserved = append(s.oomReserved, r)
		}
	}
	return s
}

// PeakReserved is the largest value of tl's reserved series.
func PeakReserved(tl *replay.Timeline) int64 {
	r := tl.ReservedAtStart
	peak := r
	for i := range tl.Entries {
		r += replay.ReservedDelta(&tl.Entries[i])
		peak = max(peak, r)
	}
	return peak
}

// whatIfRuns are dr's runs as explain reports them; Fits only where the
// what-if calls the run a fix (whatif.Assess).
func whatIfRuns(dr *whatif.DeviceResult) []WhatIfRun {
	out := make([]WhatIfRun, 0, len(dr.Runs))
	for _, r := range dr.Runs {
		conf := r.Conf
		if r.Name == "baseline" {
			conf = "baseline"
		}
		out = append(out, WhatIfRun{Conf: conf, Fits: r.Verdict == whatif.VerdictFits, Verdict: r.Verdict, PeakReservedBytes: r.PeakReserved})
	}
	return out
}

// explain walks the trace once, stopping at each oom entry (or the peak)
// and at each step boundary; sc is scanTrace of the device's timeline.
func (d *Device) explain(opts Options, sc traceScan) DeviceExplanation {
	tl := d.Timeline
	de := DeviceExplanation{Device: tl.Device, OOMs: []OOM{}, LeakSuspects: []LeakSuspect{}}
	kind := "oom"
	d.peakReserved = sc.maxReserved
	stops, reserved := sc.ooms, sc.oomReserved
	if len(stops) > opts.MaxOOMs {
		stops, reserved = stops[:opts.MaxOOMs], reserved[:opts.MaxOOMs]
	}
	if len(stops) == 0 {
		kind, stops, reserved = "peak", []int{sc.peak}, []int64{sc.peakReserved}
	}
	// The step detection, the categories and the figures at the stops read
	// the timeline and nothing else: with a second core they overlap.
	var wg sync.WaitGroup
	wg.Go(func() {
		defer crash.Recover()
		d.Steps()
	})
	wg.Go(func() {
		defer crash.Recover()
		d.Categories()
	})
	figs := make([]Figures, len(stops))
	for k, st := range tl.StatesAfter(stops) {
		figs[k] = StateFigures(st)
		figs[k].Reserved = reserved[k]
	}
	wg.Wait()
	steps := d.Steps()
	g := d.Grouper(opts.By)
	if opts.Library != nil {
		opts.Library(g)
	}
	points := steps.Ends
	de.Steps, de.StepSource, de.StepNote = len(points), steps.Source, steps.Note

	changes := false // some entry of the trace changes the active bytes
	for k := range tl.Entries {
		if replay.ActiveDelta(&tl.Entries[k]) != 0 {
			changes = true
			break
		}
	}
	w := NewWalker(tl)
	// What the memory holds at the last step end before each stop (or at
	// the start) and at the stop says which category grew: summed over the
	// live allocations there, twice per stop at most, not at every step
	// end. The groups' bytes at every step end, the leak suspects' series,
	// come from running sums (Note [running sums]), kept only where there
	// are enough step ends for a suspect.
	gc := d.Grouper(ByCategory)
	base := liveBytes(gc, w)
	baseIdx := -1
	var series *keyHist
	if len(points) >= MinLeakSteps {
		series = &keyHist{sums: newKeySums(g)}
		w.track(series.sums)
	}
	var rep map[string]replay.Alloc // at the last step point: each key's largest allocation
	oi, pi := 0, 0
	for oi < len(stops) || pi < len(points) {
		next := -2
		if oi < len(stops) {
			next = stops[oi]
		}
		if pi < len(points) && (next == -2 || points[pi].Index < next) {
			w.AdvanceTo(points[pi].Index)
			if series != nil {
				w.flush()
				series.record()
				if pi == len(points)-1 {
					rep = w.largest()
					w.untrack()
				}
			}
			// the base of the next stop when the next step end is not before it
			if next != -2 && (pi+1 == len(points) || points[pi+1].Index >= next) {
				base = liveBytes(gc, w)
			}
			baseIdx = points[pi].Index
			pi++
			continue
		}
		w.AdvanceTo(next)
		o := d.explainAt(kind, next, figs[oi], g, w.Live(), opts.Top)
		o.changes = changes
		o.Grew = grewMost(base, liveBytes(gc, w), baseIdx)
		de.OOMs = append(de.OOMs, o)
		oi++
	}
	if series != nil {
		de.LeakSuspects = leakSuspects(points, series)
	}
	for i := range de.LeakSuspects {
		ls := &de.LeakSuspects[i]
		ls.Frames = g.Frames(rep[ls.Key].Frames)
	}
	return de
}

// liveBytes sums the walker's live bytes per group key.
func liveBytes(g *Grouper, w *Walker) map[string]int64 {
	m := map[string]int64{}
	for _, a := range w.live.All() {
		x := a.alloc()
		m[g.Key(&x)] += a.Size
	}
	return m
}

// largest is each key's largest live allocation (cmpLargest), by the
// keys of the running sums tracked.
func (w *Walker) largest() map[string]replay.Alloc {
	rep := map[string]replay.Alloc{}
	for _, a := range w.live.All() {
		key := w.sums.keys[a.key]
		if r, ok := rep[key]; !ok || cmpLargest(a.alloc(), r) < 0 {
			rep[key] = a.alloc()
		}
	}
	return rep
}

func (d *Device) explainAt(kind string, i int, f Figures, g *Grouper, live []replay.Alloc, top int) OOM {
	tl := d.Timeline
	o := OOM{Kind: kind, Index: i, TimeUS: timeOf(tl, i), Verdict: "none", Frames: []Frame{}, WhatIf: []WhatIfRun{}}
	o.ReservedBytes, o.AllocatedBytes, o.CachedFreeBytes, o.LargestCachedFreeBytes = f.Reserved, f.Allocated, f.CachedFree, f.LargestCachedFree
	var active int64
	for k := range live {
		active += live[k].Size
	}
	if i >= 0 {
		e := &tl.Entries[i]
		o.RequestedBytes = e.Size
		o.Frames = g.Frames(e.Frames)
		o.Op = d.Ops.At(e.TimeUS)
		if lo, hi := d.Capture.Snapshot.TimeInterval(tl.Device, i); lo != hi {
			o.Op = d.Ops.In(lo, hi) // a recovered interval (docs/timerecovery.md)
		}
		if kind == "oom" {
			free := e.DeviceFree
			o.DeviceFreeBytes = &free
			o.Verdict = f.Verdict(o.RequestedBytes, free)
		}
	}
	o.TopHolders = g.Group(live, active)
	if len(o.TopHolders) > top {
		o.TopHolders = o.TopHolders[:top]
	}
	return o
}

// StepPoint is the state at the end of one step.
type StepPoint struct {
	Step   int64  `json:"step"`
	Index  int    `json:"index"` // the last entry at or before the step's end
	TimeUS *int64 `json:"time_us"`
	Bytes  int64  `json:"bytes"` // the suspect's live bytes there
}

// StepPoints places each step's end on the trace (the last entry at or
// before it); steps ending before the first entry or at the same entry as
// the previous step are left out.
func StepPoints(tl *replay.Timeline, steps []oprange.Op) []StepPoint {
	var out []StepPoint
	n := len(tl.Entries)
	j := 0
	for _, s := range steps {
		for j < n && (tl.Entries[j].TimeUS == 0 || tl.Entries[j].TimeUS <= s.EndUS) {
			j++
		}
		i := j - 1
		if i < 0 || (len(out) > 0 && out[len(out)-1].Index >= i) {
			continue
		}
		out = append(out, StepPoint{Step: s.Step, Index: i, TimeUS: timeOf(tl, i)})
	}
	return out
}

// LeakSuspect is a group whose live bytes at the end of each step keep
// growing.
type LeakSuspect struct {
	Key                string      `json:"key"`
	GrowthBytesPerStep int64       `json:"growth_bytes_per_step"`
	Steps              []StepPoint `json:"steps"`
	Frames             []Frame     `json:"frames"`
}

// MinLeakSteps is the fewest step ends a growth must span.
const MinLeakSteps = 3

// leakSuspects: for each group live at the last step end, the trailing
// run of step ends over which its bytes never fall; a suspect when that
// run spans at least MinLeakSteps ends, the bytes grow over it, and grow
// at half of its steps or more. Growth per step is the run's growth over
// its steps (integer bytes). Sorted by growth, descending, then key.
// series holds each group's bytes where they changed (Note [running
// sums]): a group's run is walked change by change, its bytes constant
// between them.
func leakSuspects(points []StepPoint, series *keyHist) []LeakSuspect {
	out := []LeakSuspect{}
	k := series.steps
	if k < MinLeakSteps {
		return out
	}
	for id, h := range series.hist {
		if len(h) == 0 || !h[len(h)-1].Present {
			continue
		}
		// The run goes back change by change while the bytes before a
		// change are no more than after it; t is the earliest change in
		// it, j the run's first step end, first its bytes there.
		last := h[len(h)-1].Bytes
		t := len(h) - 1
		j, first := 0, int64(0)
		for {
			j, first = int(h[t].Step), h[t].Bytes
			if j == 0 {
				break
			}
			prev := int64(0) // before the first change: nothing
			if t > 0 {
				prev = h[t-1].Bytes
			}
			if prev > first {
				break
			}
			if t == 0 {
				j, first = 0, 0 // nothing before the first change, back to step 0
				break
			}
			t--
		}
		run := k - j
		if run < MinLeakSteps || last <= first {
			continue
		}
		// the run's rises: its changes after j that raise the bytes
		ups := 0
		for c := t; c < len(h); c++ {
			if int(h[c].Step) <= j {
				continue
			}
			prev := int64(0)
			if c > 0 {
				prev = h[c-1].Bytes
			}
			if h[c].Bytes > prev {
				ups++
			}
		}
		if 2*ups < run-1 {
			continue
		}
		key := series.sums.keys[id]
		ls := LeakSuspect{Key: key, GrowthBytesPerStep: (last - first) / int64(run-1), Steps: make([]StepPoint, 0, run)}
		c, v := t, first
		for x := j; x < k; x++ {
			for c < len(h) && int(h[c].Step) <= x {
				v = h[c].Bytes
				c++
			}
			p := points[x]
			p.Bytes = v
			ls.Steps = append(ls.Steps, p)
		}
		out = append(out, ls)
	}
	slices.SortFunc(out, func(a, b LeakSuspect) int {
		return cmp.Or(cmp.Compare(b.GrowthBytesPerStep, a.GrowthBytesPerStep), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// Verdict says why a request of requested bytes failed in the state f with
// deviceFree bytes free on the device: "shortage" when allocated +
// requested exceed reserved + device free (the device cannot give that
// much), else "fragmentation" (the bytes exist, no block or range is large
// enough).
func (f Figures) Verdict(requested, deviceFree int64) string {
	if f.Allocated+requested > f.Reserved+deviceFree {
		return "shortage"
	}
	return "fragmentation"
}

// Reason is the verdict as a sentence with the figures it rests on and
// what it points to; size writes a byte count.
func (f Figures) Reason(requested, deviceFree int64, size func(int64) string) string {
	if f.Verdict(requested, deviceFree) == "shortage" {
		return fmt.Sprintf("%s allocated + %s requested exceed %s reserved + %s free on the device: "+
			"no allocator setting makes this fit; the holders below must hold less",
			size(f.Allocated), size(requested), size(f.Reserved), size(deviceFree))
	}
	if pending := f.Reserved - f.Allocated - f.CachedFree; f.CachedFree+deviceFree < requested && pending > 0 {
		return fmt.Sprintf("%s of the reserved bytes are freed but still in use on another stream (free requested, "+
			"not completed): until they are, %s cached free + %s free on the device do not cover the %s requested",
			size(pending), size(f.CachedFree), size(deviceFree), size(requested))
	}
	if f.LargestCachedFree >= requested {
		return fmt.Sprintf("a cached block of %s would hold the %s requested but may not serve it (another stream "+
			"or pool, or kept whole by max_split_size_mb); the what-if tries other allocator settings",
			size(f.LargestCachedFree), size(requested))
	}
	if deviceFree >= requested {
		return fmt.Sprintf("the device reports %s free, more than the %s requested, but not in one range, and the "+
			"largest cached block is %s: the bytes exist, not in one piece; the what-if tries other allocator settings",
			size(deviceFree), size(requested), size(f.LargestCachedFree))
	}
	return fmt.Sprintf("%s cached free + %s free on the device cover the %s requested, but the largest "+
		"cached block is %s: the bytes exist, not in one piece; the what-if tries other allocator settings",
		size(f.CachedFree), size(deviceFree), size(requested), size(f.LargestCachedFree))
}
