package explain

import (
	"cmp"
	"slices"

	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
)

// Holders is `npumon holders --json`: the live allocations of one device at
// one moment, grouped.
type Holders struct {
	Path   string `json:"path"`
	Device int    `json:"device"`
	At     Moment `json:"at"`
	By     By     `json:"by"`
	// ActiveBytes is Σ live allocation sizes (the active series at the
	// moment, docs/timeline.md); every group's share is of it.
	ActiveBytes int64 `json:"active_bytes"`
	// AllocatedBytes is Σ size of the active_allocated blocks of the
	// segment map at the moment (as `npumon stats --at-index` reports it).
	AllocatedBytes int64   `json:"allocated_bytes"`
	Allocations    int     `json:"allocations"`
	Groups         []Group `json:"groups"`
	// NoStack says what the "(no stack)" group holds, by category, when
	// it is shown (text only: the JSON has --by category for that).
	NoStack []Group `json:"-"`
}

// Device is one device of a capture, prepared for questions.
type Device struct {
	Capture  *replay.Capture
	Timeline *replay.Timeline
	Ops      *oprange.Set // annotations of the file plus any given ops
	steps    *Steps
	// peakReserved is PeakReserved of the timeline, set by explain
	peakReserved int64

	cats *category.Table // computed on first use
}

// Categories is what every allocation of the device's trace holds
// (replay/category), computed once.
func (d *Device) Categories() *category.Table {
	if d.cats == nil {
		d.cats = Categorize(d.Timeline, d.Capture.Snapshot.Stack)
	}
	return d.cats
}

// Categorize classifies the allocations of a timeline.
func Categorize(tl *replay.Timeline, stack func(snapshot.StackID) snapshot.Stack) *category.Table {
	st := tl.Start()
	start := make([]category.Start, len(st))
	for i := range st {
		start[i] = category.Start{Addr: st[i].Block.Address, Frames: tiling.BlockFrames(&st[i].Block)}
	}
	return category.Classify(tl.Entries, start, stack)
}

// CategoryOf reads an allocation's category from a table.
func CategoryOf(t *category.Table) func(a *replay.Alloc) category.Category {
	return func(a *replay.Alloc) category.Category { return t.Of(a.Born, a.Addr) }
}

// NewDevice prepares device dev of c; extra ops (from a profiler, say)
// join the file's own annotations.
func NewDevice(c *replay.Capture, dev int, extra []oprange.Op) (*Device, error) {
	tl, err := replay.NewTimelineWithoutInitial(c.Snapshot, dev)
	if err != nil {
		return nil, err
	}
	ops := append(replay.AnnotationOps(c.Snapshot, dev), extra...)
	return &Device{Capture: c, Timeline: tl, Ops: oprange.NewSet(ops)}, nil
}

// Grouper returns a grouper for this device (its stacks and ops).
func (d *Device) Grouper(by By) *Grouper {
	g := &Grouper{By: by, Stack: d.Capture.Snapshot.Stack, OpOf: d.Ops.At}
	if by == ByCategory {
		g.Category = CategoryOf(d.Categories())
	}
	return g
}

// Figures are the segment-map figures at a moment.
type Figures struct {
	Reserved, Allocated, CachedFree, LargestCachedFree int64
}

// FiguresAfter reads the segment map right after entry i (an O(n) undo
// walk): reserved bytes from the reserved series, allocated, inactive
// (cached free) and the largest inactive block from the blocks.
func FiguresAfter(tl *replay.Timeline, i int) Figures {
	return figures(tl, i, tl.StateAfter(i))
}

// FiguresAfterAll is FiguresAfter for ascending entries, in one undo walk.
func FiguresAfterAll(tl *replay.Timeline, idx []int) []Figures {
	states := tl.StatesAfter(idx)
	out := make([]Figures, len(idx))
	for k, i := range idx {
		out[k] = figures(tl, i, states[k])
	}
	return out
}

func figures(tl *replay.Timeline, i int, state []snapshot.Segment) Figures {
	f := StateFigures(state)
	f.Reserved = tl.ReservedAtStart
	for j := 0; j <= i && j < len(tl.Entries); j++ {
		f.Reserved += replay.ReservedDelta(&tl.Entries[j])
	}
	return f
}

// StateFigures reads a segment map: reserved bytes (Σ segment sizes),
// allocated (active_allocated blocks), cached free (inactive blocks) and the
// largest inactive block. The OOM figures of explain and of the TUI's OOM
// panel both come from here (tiling.FiguresOf).
func StateFigures(state []snapshot.Segment) Figures {
	t := tiling.FiguresOf(state)
	return Figures{Reserved: t.Reserved, Allocated: t.Allocated, CachedFree: t.Free, LargestCachedFree: t.LargestFree}
}

// Holders groups the live allocations at the moment spec; top > 0 keeps
// the largest top groups.
func (d *Device) Holders(spec string, g *Grouper, top int) (*Holders, error) {
	m, err := At(d.Timeline, spec)
	if err != nil {
		return nil, err
	}
	live := LiveAfter(d.Timeline, m.Index)
	h := &Holders{Path: d.Capture.Path, Device: d.Timeline.Device, At: m, By: g.By, Allocations: len(live)}
	for i := range live {
		h.ActiveBytes += live[i].Size
	}
	h.AllocatedBytes = FiguresAfter(d.Timeline, m.Index).Allocated
	h.Groups = g.Group(live, h.ActiveBytes)
	if top > 0 && len(h.Groups) > top {
		h.Groups = h.Groups[:top]
	}
	h.NoStack = d.noStackCategories(g, h.Groups, live, h.ActiveBytes)
	return h, nil
}

// noStackCategories breaks the "(no stack)" group among groups down by
// memory category. Allocations without a stack are mostly made before
// memory history was recorded — parameters, as a rule — and the label
// alone answers nothing.
func (d *Device) noStackCategories(g *Grouper, groups []Group, live []replay.Alloc, total int64) []Group {
	if g.By != ByCallsite && g.By != ByStack {
		return nil
	}
	if !slices.ContainsFunc(groups, func(gr Group) bool { return gr.Key == NoStackKey }) {
		return nil
	}
	var bare []replay.Alloc
	for i := range live {
		if g.Key(&live[i]) == NoStackKey {
			bare = append(bare, live[i])
		}
	}
	cg := d.Grouper(ByCategory)
	return cg.Group(bare, total)
}

// Diff is `npumon diff --json`: group by group, what changed between two
// moments of one file or the ends of two files of one job.
type Diff struct {
	From   DiffSide    `json:"from"`
	To     DiffSide    `json:"to"`
	By     By          `json:"by"`
	Groups []DiffGroup `json:"groups"`
	// Warnings: the two sides do not look like one job, or the diff runs
	// backwards (DiffWarnings, MomentsWarning); the command prints them on
	// stderr too.
	Warnings []string `json:"warnings,omitempty"`
}

// DiffSide is one end of a diff.
type DiffSide struct {
	Path        string `json:"path"`
	Device      int    `json:"device"`
	At          Moment `json:"at"`
	ActiveBytes int64  `json:"active_bytes"`
	Allocations int    `json:"allocations"`
}

// DiffGroup is one group's change. Born are allocations live at To and
// not at From, Freed those live at From and gone at To.
type DiffGroup struct {
	Key        string  `json:"key"`
	BytesFrom  int64   `json:"bytes_from"`
	BytesTo    int64   `json:"bytes_to"`
	DeltaBytes int64   `json:"delta_bytes"`
	CountFrom  int     `json:"count_from"`
	CountTo    int     `json:"count_to"`
	BornCount  int     `json:"born_count"`
	BornBytes  int64   `json:"born_bytes"`
	FreedCount int     `json:"freed_count"`
	FreedBytes int64   `json:"freed_bytes"`
	Frames     []Frame `json:"frames"`
}

// allocID identifies an allocation across two moments: in one trace by
// address and birth entry; across two files by address and size (and
// birth time when both know it).
type allocID struct {
	addr uint64
	born int64
	size int64
}

// DiffAllocs compares two live sets; sameTrace says both come from one
// trace (birth indices comparable). Groups come sorted by |delta|
// descending, then key.
func DiffAllocs(g *Grouper, from, to []replay.Alloc, sameTrace bool) []DiffGroup {
	id := func(a *replay.Alloc) allocID {
		if sameTrace {
			return allocID{a.Addr, int64(a.Born), 0}
		}
		return allocID{a.Addr, a.BornTime, a.Size}
	}
	inFrom := make(map[allocID]struct{}, len(from))
	for i := range from {
		inFrom[id(&from[i])] = struct{}{}
	}
	inTo := make(map[allocID]struct{}, len(to))
	for i := range to {
		inTo[id(&to[i])] = struct{}{}
	}
	idx := map[string]int{}
	out := []DiffGroup{}
	big := map[string]replay.Alloc{}
	get := func(a *replay.Alloc) *DiffGroup {
		k := g.Key(a)
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, DiffGroup{Key: k})
		}
		if b, ok := big[k]; !ok || cmpLargest(*a, b) < 0 {
			big[k] = *a
		}
		return &out[j]
	}
	for i := range to {
		a := &to[i]
		gr := get(a)
		gr.BytesTo += a.Size
		gr.CountTo++
		if _, ok := inFrom[id(a)]; !ok {
			gr.BornCount++
			gr.BornBytes += a.Size
		}
	}
	for i := range from {
		a := &from[i]
		k := g.Key(a)
		if _, ok := idx[k]; !ok {
			get(a)
		}
		gr := &out[idx[k]]
		gr.BytesFrom += a.Size
		gr.CountFrom++
		if _, ok := inTo[id(a)]; !ok {
			gr.FreedCount++
			gr.FreedBytes += a.Size
		}
	}
	for i := range out {
		gr := &out[i]
		gr.DeltaBytes = gr.BytesTo - gr.BytesFrom
		b := big[gr.Key]
		gr.Frames = g.Frames(b.Frames)
	}
	slices.SortStableFunc(out, func(a, b DiffGroup) int {
		return cmp.Or(cmp.Compare(abs(b.DeltaBytes), abs(a.DeltaBytes)), cmp.Compare(a.Key, b.Key))
	})
	return out
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Side is one end of a diff: the live allocations at a moment.
func (d *Device) Side(spec string) (DiffSide, []replay.Alloc, error) { return d.side(spec, "--at") }

// side is Side with errors naming flag.
func (d *Device) side(spec, flag string) (DiffSide, []replay.Alloc, error) {
	m, err := FlagAt(d.Timeline, spec, flag)
	if err != nil {
		return DiffSide{}, nil, err
	}
	live := LiveAfter(d.Timeline, m.Index)
	s := DiffSide{Path: d.Capture.Path, Device: d.Timeline.Device, At: m, Allocations: len(live)}
	for i := range live {
		s.ActiveBytes += live[i].Size
	}
	return s, live, nil
}

// DiffMoments compares two moments of one device trace; g's stacks and ops
// are the device's.
func DiffMoments(d *Device, from, to string, g *Grouper) (*Diff, error) {
	g.Stack, g.OpOf = d.Capture.Snapshot.Stack, d.Ops.At
	if g.By == ByCategory {
		g.Category = CategoryOf(d.Categories())
	}
	fs, fl, err := d.side(from, "--from")
	if err != nil {
		return nil, err
	}
	ts, tl, err := d.side(to, "--to")
	if err != nil {
		return nil, err
	}
	return &Diff{From: fs, To: ts, By: g.By, Groups: DiffAllocs(g, fl, tl, true)}, nil
}

// DiffDevices compares the ends of two files of one job: their stacks are
// interned into one table so that equal frames make equal keys.
func DiffDevices(a, b *Device, g *Grouper) *Diff {
	tab := snapshot.NewStackTable()
	side := func(d *Device) (DiffSide, []replay.Alloc) {
		s, live, _ := d.Side("end")
		for i := range live {
			live[i].Frames = tab.Intern(d.Capture.Snapshot.Stack(live[i].Frames))
		}
		return s, live
	}
	fs, fl := side(a)
	ts, tl := side(b)
	if g.By == ByCategory {
		// birth indices are each file's own: an allocation is named as
		// DiffAllocs matches them across files
		cats := map[allocID]category.Category{}
		for _, s := range []struct {
			d    *Device
			live []replay.Alloc
		}{{a, fl}, {b, tl}} {
			t := s.d.Categories()
			for i := range s.live {
				x := &s.live[i]
				cats[allocID{x.Addr, x.BornTime, x.Size}] = t.Of(x.Born, x.Addr)
			}
		}
		g.Category = func(x *replay.Alloc) category.Category { return cats[allocID{x.Addr, x.BornTime, x.Size}] }
	}
	stacks := tab.Stacks()
	g.Stack = func(id snapshot.StackID) snapshot.Stack {
		if id <= 0 || int(id) >= len(stacks) {
			return nil
		}
		return stacks[id]
	}
	// ops of either file are keyed by time; the later file's serve both
	g.OpOf = func(t int64) string {
		if n := b.Ops.At(t); n != "" {
			return n
		}
		return a.Ops.At(t)
	}
	return &Diff{From: fs, To: ts, By: g.By, Groups: DiffAllocs(g, fl, tl, false)}
}
