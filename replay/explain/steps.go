package explain

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
)

// StepSource names where a device's step boundaries came from.
type StepSource string

const (
	StepsNone       StepSource = ""           // no boundaries found
	StepsProfiler   StepSource = "profiler"   // ProfilerStep#N ranges
	StepsAnnotation StepSource = "annotation" // Optimizer.step#… ranges of the file
	StepsOptimizer  StepSource = "optimizer"  // the optimizer's step call site in the stacks
	StepsPeriod     StepSource = "period"     // the trace's repeat period
)

// Describe says where steps of this source come from, as in "12 steps
// from the trace's repeat period".
func (s StepSource) Describe() string {
	switch s {
	case StepsProfiler:
		return "ProfilerStep#N ranges"
	case StepsAnnotation:
		return "Optimizer.step annotations"
	case StepsOptimizer:
		return "the optimizer's step call site"
	case StepsPeriod:
		return "the trace's repeat period"
	}
	return "nowhere"
}

// Steps are the step boundaries of one device trace: each step's last
// entry, ascending. Step k covers the entries after step k-1's end up to
// and including its own; entries after the last end belong to no step.
type Steps struct {
	Source StepSource
	// Ends holds each step's end (Step, Index, TimeUS; Bytes is unused).
	Ends []StepPoint
	// Starts holds each step's first entry where the source knows it (the
	// repeat period: what lies between iterations is no step's), else
	// the entry after the previous end (0 for the first step).
	Starts []int
	// Note says, when no source gave MinLeakSteps ends, why not.
	Note string
}

// Len is the number of steps.
func (s *Steps) Len() int { return len(s.Ends) }

// StepOf is the position in Ends of the step holding entry i, -1 when i
// lies in no step (before the first start, between an end and the next
// start, or after the last end).
func (s *Steps) StepOf(i int) int {
	k, _ := slices.BinarySearchFunc(s.Ends, i, func(p StepPoint, i int) int { return p.Index - i })
	if k == len(s.Ends) || i < s.Starts[k] {
		return -1
	}
	return k
}

// Steps finds the device's step boundaries (DetectSteps), once.
func (d *Device) Steps() *Steps {
	if d.steps == nil {
		d.steps = DetectSteps(d.Timeline, d.Capture.Snapshot.Stack, d.Ops)
	}
	return d.steps
}

// DetectSteps tries the step sources in order: ProfilerStep#N ranges,
// Optimizer.step#… ranges, the optimizer's step call site, the repeat
// period. The first source with at least MinLeakSteps ends wins; failing
// that, the first with any. ops may be nil. docs/explain.md states each
// rule.
func DetectSteps(tl *replay.Timeline, stack func(snapshot.StackID) snapshot.Stack, ops *Ops) *Steps {
	var notes []string
	var fallback *Steps
	try := func(s *Steps) *Steps {
		if len(s.Ends) >= MinLeakSteps {
			return s
		}
		if len(s.Ends) > 0 && fallback == nil {
			fallback = s
		}
		if s.Note != "" {
			notes = append(notes, s.Note)
		}
		return nil
	}
	timed := hasTimes(tl)
	var markers, optRanges []Op
	for _, op := range ops.all() {
		switch {
		case op.IsStep:
			markers = append(markers, op)
		case strings.HasPrefix(op.Name, "Optimizer.step#"):
			optRanges = append(optRanges, op)
		}
	}
	if s := try(rangeSteps(tl, StepsProfiler, markers, timed)); s != nil {
		return s
	}
	if s := try(rangeSteps(tl, StepsAnnotation, optRanges, timed)); s != nil {
		return s
	}
	if s := try(optimizerSteps(tl, stack)); s != nil {
		return s
	}
	if s := try(periodSteps(tl)); s != nil {
		return s
	}
	if fallback != nil {
		return fallback
	}
	return &Steps{Note: strings.Join(notes, "; ")}
}

// rangeSteps places time ranges' ends on the trace (StepPoints); numbered
// by their ProfilerStep#N where they carry one, else 0, 1, ….
func rangeSteps(tl *replay.Timeline, src StepSource, ranges []Op, timed bool) *Steps {
	s := &Steps{Source: src}
	if len(ranges) == 0 {
		return s
	}
	if !timed {
		s.Note = fmt.Sprintf("%d %s not placed: the trace has no time_us", len(ranges), src.Describe())
		return s
	}
	slices.SortStableFunc(ranges, func(a, b Op) int { return cmp.Compare(a.EndUS, b.EndUS) })
	if src != StepsProfiler {
		for i := range ranges {
			ranges[i].Step = int64(i)
		}
	}
	s.Ends = StepPoints(tl, ranges)
	s.fillStarts()
	return s
}

// fillStarts starts each step right after the previous one's end.
func (s *Steps) fillStarts() {
	s.Starts = make([]int, len(s.Ends))
	for k := 1; k < len(s.Ends); k++ {
		s.Starts[k] = s.Ends[k-1].Index + 1
	}
}

// IsOptimizerStep reports whether f is an optimizer's step method: the
// function step in a file under an optim/ or optimizers/ directory
// (torch/optim, torch_npu/optim, apex/optimizers, …), learning-rate
// schedulers (lr_scheduler.py) excepted.
func IsOptimizerStep(f snapshot.Frame) bool {
	if f.Name != "step" {
		return false
	}
	p := strings.ReplaceAll(f.Filename, "\\", "/")
	if strings.HasPrefix(path.Base(p), "lr_scheduler") {
		return false
	}
	dir := "/" + path.Dir(p) + "/"
	return strings.Contains(dir, "/optim/") || strings.Contains(dir, "/optimizers/")
}

// optimizerSteps: a step call is a run of allocations whose stacks hold
// an optimizer step frame, broken by an allocation whose stack does not
// (allocations without a stack break nothing); it ends at its last entry
// of any action inside the step.
func optimizerSteps(tl *replay.Timeline, stack func(snapshot.StackID) snapshot.Stack) *Steps {
	s := &Steps{Source: StepsOptimizer}
	inStep := map[snapshot.StackID]bool{}
	in := func(id snapshot.StackID) bool {
		v, ok := inStep[id]
		if !ok {
			v = slices.ContainsFunc(stack(id), IsOptimizerStep)
			inStep[id] = v
		}
		return v
	}
	open, last := false, -1
	closeRun := func() {
		if open {
			s.Ends = append(s.Ends, StepPoint{Step: int64(len(s.Ends)), Index: last, TimeUS: timeOf(tl, last)})
		}
		open = false
	}
	for i := range tl.Entries {
		e := &tl.Entries[i]
		if e.Frames == snapshot.NoStack {
			continue
		}
		if in(e.Frames) {
			last = i
			open = open || e.Action == snapshot.ActionAlloc
			continue
		}
		if e.Action == snapshot.ActionAlloc {
			closeRun()
		}
	}
	closeRun()
	s.fillStarts()
	return s
}

// minPeriodCover is the share of the trace the iterations must span
// together for the repeat period to count.
const minPeriodCover = 0.5

// periodKey identifies an entry for the repeat period: the same action at
// the same stack with the same size recurs once per iteration.
type periodKey struct {
	action snapshot.Action
	stack  snapshot.StackID
	size   int64
}

// periodSteps cuts the trace into iterations by its repeat period (the
// rule: docs/explain.md "Steps"). Keys (action, stack, size) that occur
// exactly c times, c ≥ MinLeakSteps, are candidates for c iterations; a
// key follows the period when its k-th occurrence lies between the
// midpoints of the keys' median k-1-th, k-th and k+1-th occurrences.
// Iteration k spans its following keys' k-th occurrences; a candidate
// holds when the iterations do not overlap and span half the trace. Of
// the holding candidates, the fewest iterations that at least a quarter
// as many keys follow as the most-followed one (a loop over layers inside
// an iteration repeats too, finer).
func periodSteps(tl *replay.Timeline) *Steps {
	s := &Steps{Source: StepsPeriod}
	n := len(tl.Entries)
	counts := make(map[periodKey]int32, 1024)
	for i := range tl.Entries {
		e := &tl.Entries[i]
		if e.Action == snapshot.ActionSnapshot || e.Action == snapshot.ActionOOM {
			continue
		}
		counts[periodKey{e.Action, e.Frames, e.Size}]++
	}
	byCount := map[int32][]periodKey{}
	for k, c := range counts {
		if c >= MinLeakSteps {
			byCount[c] = append(byCount[c], k)
		}
	}
	// Try the candidates most keys share first; a handful is enough.
	cands := make([]int32, 0, len(byCount))
	for c := range byCount {
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b int32) int {
		if d := len(byCount[b]) - len(byCount[a]); d != 0 {
			return d
		}
		return int(a - b)
	})
	cands = cands[:min(len(cands), 8)]
	type fit struct {
		c            int
		keys         int
		starts, ends []int
	}
	var fits []fit
	for _, c := range cands {
		if st, en, k := periodFit(tl, int(c), byCount[c], n); k > 0 {
			fits = append(fits, fit{int(c), k, st, en})
		}
	}
	if len(fits) == 0 {
		s.Note = "the trace does not repeat: no stack, action and size recurs in three or more iterations spanning half of it"
		return s
	}
	most := 0
	for _, f := range fits {
		most = max(most, f.keys)
	}
	best := fit{}
	for _, f := range fits {
		if 4*f.keys >= most && (best.c == 0 || f.c < best.c) {
			best = f
		}
	}
	s.Starts = best.starts
	for k, end := range best.ends {
		s.Ends = append(s.Ends, StepPoint{Step: int64(k), Index: end, TimeUS: timeOf(tl, end)})
	}
	return s
}

// periodFit tests c iterations against keys (each occurring c times):
// the iterations' starts and ends and how many keys follow them, 0 keys
// when the candidate does not hold.
func periodFit(tl *replay.Timeline, c int, keys []periodKey, n int) (starts, ends []int, following int) {
	slot := make(map[periodKey]int, len(keys))
	for i, k := range keys {
		slot[k] = i
	}
	occ := make([]int32, len(keys)*c) // key i's occurrences at occ[i*c:]
	seen := make([]int32, len(keys))
	for i := range tl.Entries {
		e := &tl.Entries[i]
		if j, ok := slot[periodKey{e.Action, e.Frames, e.Size}]; ok {
			occ[j*c+int(seen[j])] = int32(i)
			seen[j]++
		}
	}
	med := make([]int32, c)
	col := make([]int32, len(keys))
	for k := range c {
		for i := range keys {
			col[i] = occ[i*c+k]
		}
		slices.Sort(col)
		med[k] = col[len(col)/2]
	}
	lo := func(k int) int32 {
		if k == 0 {
			return med[0] - (med[1]-med[0])/2
		}
		return (med[k-1] + med[k]) / 2
	}
	hi := func(k int) int32 {
		if k == c-1 {
			return med[c-1] + (med[c-1]-med[c-2])/2
		}
		return (med[k] + med[k+1]) / 2
	}
	starts, ends = make([]int, c), make([]int, c)
	for k := range c {
		starts[k], ends[k] = n, -1
	}
	for i := range keys {
		o := occ[i*c : (i+1)*c]
		ok := true
		for k, v := range o {
			if v <= lo(k) || v > hi(k) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		following++
		for k, v := range o {
			starts[k], ends[k] = min(starts[k], int(v)), max(ends[k], int(v))
		}
	}
	if following == 0 {
		return nil, nil, 0
	}
	for k := 1; k < c; k++ {
		if starts[k] <= ends[k-1] {
			return nil, nil, 0
		}
	}
	if float64(ends[c-1]-starts[0]+1) < minPeriodCover*float64(n) {
		return nil, nil, 0
	}
	return starts, ends, following
}
