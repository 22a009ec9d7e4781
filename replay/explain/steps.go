package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/frames"
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
	// Starts holds each step's first entry: the entry after the previous
	// end, 0 for the first step, except for the repeat period, whose
	// first iteration starts after the setup (entries before it and after
	// the last end belong to no step).
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
func DetectSteps(tl *replay.Timeline, stack func(snapshot.StackID) snapshot.Stack, ops *oprange.Set) *Steps {
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
	var markers, optRanges []oprange.Op
	for _, op := range ops.All() {
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
func rangeSteps(tl *replay.Timeline, src StepSource, ranges []oprange.Op, timed bool) *Steps {
	s := &Steps{Source: src}
	if len(ranges) == 0 {
		return s
	}
	if !timed {
		s.Note = fmt.Sprintf("%d %s not placed: the trace has no time_us", len(ranges), src.Describe())
		return s
	}
	slices.SortStableFunc(ranges, func(a, b oprange.Op) int { return cmp.Compare(a.EndUS, b.EndUS) })
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
// function step in an optimizer's file (frames.OptimizerFile).
func IsOptimizerStep(f snapshot.Frame) bool {
	return f.Name == "step" && frames.OptimizerFile(f.Filename)
}

// optimizerSteps: a step call is a run of allocations whose stacks hold
// an optimizer step frame, broken by an allocation whose stack does not
// (allocations without a stack break nothing); it ends at its last entry
// of any action inside the step.
func optimizerSteps(tl *replay.Timeline, stack func(snapshot.StackID) snapshot.Stack) *Steps {
	s := &Steps{Source: StepsOptimizer}
	var inStep []int8 // per stack id: 0 not yet looked at, 1 inside a step, -1 not
	in := func(id snapshot.StackID) bool {
		if int(id) >= len(inStep) {
			n := max(int(id)+1, 2*len(inStep))
			inStep = append(inStep, make([]int8, n-len(inStep))...)
		}
		if inStep[id] == 0 {
			inStep[id] = -1
			if slices.ContainsFunc(stack(id), IsOptimizerStep) {
				inStep[id] = 1
			}
		}
		return inStep[id] > 0
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
		if e.Frames <= snapshot.NoStack {
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

// minPeriodShare is the share of the iterations' entries whose keys must
// recur (MinLeakSteps times or more): in a training loop most entries do,
// in a trace without a loop a few keys line up by chance.
const minPeriodShare = 0.5

// periodKey identifies an entry for the repeat period: the same action at
// the same stack with the same size recurs once per iteration.
type periodKey struct {
	action snapshot.Action
	stack  snapshot.StackID
	size   int64
}

// Step detection reads the entries directly, pass by pass, instead of
// copying columns out of them first: on a fresh process every new page
// costs a fault, and per-entry arrays of a 1M-entry trace (4 MiB each)
// cost more in faults than a pass over the entries does in reads.

// keyedEntry is an entry whose period key may recur MinLeakSteps times
// or more (periodKeys): its index and its key's id.
type keyedEntry struct{ i, id int32 }

// periodHash mixes an entry's key (action, stack, size) for the counting
// sketch.
func periodHash(e *snapshot.TraceEntry) uint64 {
	h := (uint64(e.Action)<<32 | uint64(uint32(e.Frames))) * 0x9E3779B97F4A7C15
	return (h ^ uint64(e.Size)) * 0xBF58476D1CE4E5B9
}

// hasPeriodKey reports whether e has a period key: an entry with a stack
// id, not a snapshot or oom entry.
func hasPeriodKey(e *snapshot.TraceEntry) bool {
	return e.Frames >= 0 && e.Action != snapshot.ActionSnapshot && e.Action != snapshot.ActionOOM
}

// periodKeys numbers the keys of the entries whose keys may recur
// MinLeakSteps times: keyed holds those entries ascending by index with
// their keys' ids, counts[id] how often each key occurs. A key left out
// occurs fewer than MinLeakSteps times; one kept may too (its count says
// so). When fewer than minPeriodShare × minPeriodCover of the entries
// may have such keys no repeat period can hold (periodSteps), and it
// returns none.
func periodKeys(tl *replay.Timeline) (keyed []keyedEntry, counts []int32) {
	// A key recurs only where its stack does, and a counting sketch (a
	// saturating 2-bit counter per hash bucket, four buckets a byte)
	// over-counts but never under-counts: an entry whose stack or bucket
	// holds fewer than MinLeakSteps has a key that recurs fewer times and
	// stays out of the table, which would otherwise hold nearly every
	// entry of a trace whose keys never repeat.
	bits := 12
	for bits < 24 && 1<<bits < 4*len(tl.Entries) {
		bits++
	}
	sk := sketch{c: make([]uint8, 1<<bits/4), shift: uint(64 - bits)}
	var stackCount []int32
	full := 0 // entries in full counters: at least those whose keys recur
	for i := range tl.Entries {
		e := &tl.Entries[i]
		if !hasPeriodKey(e) {
			continue
		}
		if f := int(e.Frames); f >= len(stackCount) {
			stackCount = append(stackCount, make([]int32, max(f+1, 2*len(stackCount), 64)-len(stackCount))...)
		}
		stackCount[e.Frames]++
		switch sk.add(periodHash(e)) {
		case MinLeakSteps: // the counter filled: its entries so far
			full += MinLeakSteps
		case MinLeakSteps + 1:
			full++
		}
	}
	// A repeat period's iterations span half the trace, half of their
	// entries' keys recurring (periodSteps): with fewer such entries in the
	// whole trace none holds.
	if float64(full) < minPeriodShare*minPeriodCover*float64(len(tl.Entries)) {
		return nil, nil
	}
	// Most keys pack exactly into 64 bits (an open-addressing table on
	// them is several times cheaper than a map on the struct); the rest go
	// to a map. Each key that recurs fills its bucket: the full buckets
	// size the table.
	packed := newPackedIDs(sk.full())
	var other map[periodKey]int32
	keyed = make([]keyedEntry, 0, full) // each keyed entry is in a full counter
	for i := range tl.Entries {
		e := &tl.Entries[i]
		if !hasPeriodKey(e) || stackCount[e.Frames] < MinLeakSteps || sk.count(periodHash(e)) < MinLeakSteps {
			continue
		}
		var id int32
		if uint64(e.Action) < 1<<4 && uint32(e.Frames) < 1<<28 && uint64(e.Size) < 1<<32 {
			id = packed.id(uint64(e.Action)<<60|uint64(e.Frames)<<32|uint64(e.Size), int32(len(counts)))
			if id == int32(len(counts)) {
				counts = append(counts, 0)
			}
		} else {
			k := periodKey{e.Action, e.Frames, e.Size}
			var ok bool
			if id, ok = other[k]; !ok {
				if other == nil {
					other = map[periodKey]int32{}
				}
				id = int32(len(counts))
				other[k] = id
				counts = append(counts, 0)
			}
		}
		keyed = append(keyed, keyedEntry{int32(i), id})
		counts[id]++
	}
	return keyed, counts
}

// sketch is a counting sketch of saturating 2-bit counters, four to a
// byte, indexed by a hash's top bits.
type sketch struct {
	c     []uint8
	shift uint
}

// A 2-bit counter holds MinLeakSteps (this fails to compile otherwise).
var _ [3 - MinLeakSteps]struct{}

// add counts h; it returns the counter's value, MinLeakSteps + 1 where
// it was full already.
func (s *sketch) add(h uint64) uint8 {
	b := h >> s.shift
	sh := (b & 3) * 2
	c := s.c[b>>2] >> sh & 3
	if c < MinLeakSteps {
		s.c[b>>2] += 1 << sh
	}
	return c + 1
}

func (s *sketch) count(h uint64) uint8 {
	b := h >> s.shift
	return s.c[b>>2] >> ((b & 3) * 2) & 3
}

// full is the number of counters at MinLeakSteps.
func (s *sketch) full() int {
	n := 0
	for _, c := range s.c {
		for ; c != 0; c >>= 2 {
			if c&3 == MinLeakSteps {
				n++
			}
		}
	}
	return n
}

// packedIDs numbers packed period keys: an open-addressing table
// (linear probing, at most half full, grown as keys come) of keys and
// their ids + 1 (0: an empty slot), side by side (one cache line per
// probe).
type packedIDs struct {
	slots []packedSlot
	n     int
	bits  uint
}

type packedSlot struct {
	key uint64
	id  int32
}

// newPackedIDs sizes the table for n keys.
func newPackedIDs(n int) *packedIDs {
	p := &packedIDs{bits: 11}
	for 1<<p.bits < 2*n {
		p.bits++
	}
	p.slots = make([]packedSlot, 1<<p.bits)
	return p
}

// id is k's id, next (which becomes k's) when k is new.
func (p *packedIDs) id(k uint64, next int32) int32 {
	if 2*(p.n+1) > len(p.slots) {
		p.grow()
	}
	mask := uint64(len(p.slots) - 1)
	for h := (k * 0x9E3779B97F4A7C15) >> (64 - p.bits); ; h = (h + 1) & mask {
		sl := &p.slots[h]
		switch {
		case sl.id == 0:
			sl.key, sl.id = k, next+1
			p.n++
			return next
		case sl.key == k:
			return sl.id - 1
		}
	}
}

func (p *packedIDs) grow() {
	old := p.slots
	p.bits++
	p.slots = make([]packedSlot, 1<<p.bits)
	mask := uint64(len(p.slots) - 1)
	for _, sl := range old {
		if sl.id == 0 {
			continue
		}
		h := (sl.key * 0x9E3779B97F4A7C15) >> (64 - p.bits)
		for p.slots[h].id != 0 {
			h = (h + 1) & mask
		}
		p.slots[h] = sl
	}
}

// periodSteps cuts the trace into iterations by its repeat period (the
// rule: docs/explain.md "Steps"). Keys (action, stack, size) that occur
// exactly c times, c ≥ MinLeakSteps, are candidates for c iterations; a
// key follows the period when its k-th occurrence lies strictly between
// the keys' median k-1-th and k+1-th occurrences and each gap between its
// occurrences is within a quarter of the medians' gap (the same phase in
// every iteration). Iteration k spans its following keys' k-th
// occurrences (then each ends where the next starts); a candidate holds
// when those do not overlap, span half the trace, and half their entries
// have keys that recur. Of the
// holding candidates the most-followed one, or an outer loop of it: the
// fewest iterations, at most half as many, that at least a quarter as
// many keys follow (a loop over layers inside an iteration repeats too,
// finer).
func periodSteps(tl *replay.Timeline) *Steps {
	s := &Steps{Source: StepsPeriod}
	n := len(tl.Entries)
	keyed, counts := periodKeys(tl)
	byCount := map[int32][]int32{}
	for id, c := range counts {
		if c >= MinLeakSteps {
			byCount[c] = append(byCount[c], int32(id))
		}
	}
	// Try the candidates most keys share first; a handful is enough.
	cands := make([]int32, 0, len(byCount))
	for c := range byCount {
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b int32) int {
		return cmp.Or(cmp.Compare(len(byCount[b]), len(byCount[a])), cmp.Compare(a, b))
	})
	cands = cands[:min(len(cands), 8)]
	// The candidates' keys' occurrences, key by key, in one pass: keys
	// occurring c times, and c-1 times (a trace cut by the history's ring
	// buffer starts inside an iteration: its keys split between the two).
	slot := make([]int32, len(counts)) // key → its occurrences' offset in occ, -1 if no candidate's
	for i := range slot {
		slot[i] = -1
	}
	total := int32(0)
	for _, c := range cands {
		for _, cc := range []int32{c, c - 1} {
			for _, id := range byCount[cc] {
				if slot[id] < 0 {
					slot[id] = total
					total += cc
				}
			}
		}
	}
	occ := make([]int32, total)
	fill := slices.Clone(slot)
	for _, k := range keyed {
		if fill[k.id] >= 0 {
			occ[fill[k.id]] = k.i
			fill[k.id]++
		}
	}
	rowsOf := func(c int32) [][]int32 {
		rows := make([][]int32, 0, len(byCount[c]))
		for _, id := range byCount[c] {
			rows = append(rows, occ[slot[id]:slot[id]+c])
		}
		return rows
	}
	type fit struct {
		c            int
		keys         int
		starts, ends []int
	}
	var fits []fit
	for _, c := range cands {
		rows := rowsOf(c)
		st, en, k := periodFit(int(c), rows, rowsOf(c-1), n)
		if k == 0 {
			continue
		}
		// Most of a loop's entries recur; by chance, few do.
		recur := 0
		from, _ := slices.BinarySearchFunc(keyed, st[0], func(k keyedEntry, i int) int { return cmp.Compare(int(k.i), i) })
		for _, k := range keyed[from:] {
			if int(k.i) > en[c-1] {
				break
			}
			if counts[k.id] >= MinLeakSteps {
				recur++
			}
		}
		if float64(recur) >= minPeriodShare*float64(en[c-1]-st[0]+1) {
			fits = append(fits, fit{int(c), k, st, en})
		}
	}
	if len(fits) == 0 {
		s.Note = "the trace does not repeat: no stack, action and size recurs in three or more iterations spanning half of it"
		return s
	}
	best := fits[0]
	for _, f := range fits {
		if f.keys > best.keys || (f.keys == best.keys && f.c < best.c) {
			best = f
		}
	}
	// An outer loop: at most half as many iterations, followed by a
	// quarter as many keys or more.
	outer := best
	for _, f := range fits {
		if 2*f.c <= best.c && 4*f.keys >= best.keys && f.c < outer.c {
			outer = f
		}
	}
	best = outer
	s.Starts = best.starts
	for k, end := range best.ends {
		s.Ends = append(s.Ends, StepPoint{Step: int64(k), Index: end, TimeUS: timeOf(tl, end)})
	}
	return s
}

// periodFit tests c iterations against rows (each key's c occurrences)
// and partial (keys occurring c-1 times, missing the first or the last
// iteration, whichever median their first occurrence lies nearer): the
// iterations' starts and ends and how many keys follow them, 0 keys when
// the candidate does not hold.
func periodFit(c int, rows, partial [][]int32, n int) (starts, ends []int, following int) {
	med := make([]int32, c)
	col := make([]int32, len(rows))
	for k := range c {
		for i, r := range rows {
			col[i] = r[k]
		}
		slices.Sort(col)
		med[k] = col[len(col)/2]
	}
	lo := func(k int) int32 {
		if k == 0 {
			return med[0] - (med[1] - med[0])
		}
		return med[k-1]
	}
	hi := func(k int) int32 {
		if k == c-1 {
			return med[c-1] + (med[c-1] - med[c-2])
		}
		return med[k+1]
	}
	starts, ends = make([]int, c), make([]int, c)
	for k := range c {
		starts[k], ends[k] = n, -1
	}
	follow := func(o []int32, shift int) {
		for j, v := range o {
			k := j + shift
			if v <= lo(k) || v >= hi(k) {
				return
			}
			// the same phase in every iteration: each gap within a
			// quarter of the medians' gap
			if j > 0 {
				if d, m := v-o[j-1], med[k]-med[k-1]; 4*abs32(d-m) > m {
					return
				}
			}
		}
		following++
		for j, v := range o {
			k := j + shift
			starts[k], ends[k] = min(starts[k], int(v)), max(ends[k], int(v))
		}
	}
	for _, o := range rows {
		follow(o, 0)
	}
	for _, o := range partial {
		shift := 0
		if abs32(o[0]-med[1]) < abs32(o[0]-med[0]) {
			shift = 1
		}
		follow(o, shift)
	}
	if following == 0 {
		return nil, nil, 0
	}
	for k := range c {
		if ends[k] < 0 || (k > 0 && starts[k] <= ends[k-1]) {
			return nil, nil, 0
		}
	}
	if float64(ends[c-1]-starts[0]+1) < minPeriodCover*float64(n) {
		return nil, nil, 0
	}
	// Iterations are contiguous: each ends where the next starts (after
	// its frees, before the next forward); the last at its last following
	// key's occurrence.
	for k := range c - 1 {
		ends[k] = starts[k+1] - 1
	}
	return starts, ends, following
}

func abs32(v int32) int32 {
	if v < 0 {
		return -v
	}
	return v
}
