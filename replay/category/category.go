// Package category says what each allocation of a device trace is —
// parameter, gradient, optimizer state, activation, temporary, workspace —
// from the snapshot alone: the stack it was allocated under (which names
// the thread and the phase of the step), when it was freed relative to the
// other allocations, and torch_npu's workspace entries. The rules and their
// evidence are in docs/explain.md ("Memory categories"). It is computed
// once per trace (Classify, one pass) and read per allocation (Table.Of).
package category

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/addrmap"
	"github.com/npumon/npumon/replay/frames"
)

// Category is what an allocation holds.
type Category uint8

// Categories, in the order outputs list them.
const (
	Unknown Category = iota
	Parameter
	Gradient
	OptimizerState
	Activation
	Temporary
	Workspace
	numCategories
)

// Count is the number of categories; a Category indexes [Count]int64.
const Count = int(numCategories)

var names = [numCategories]string{"unknown", "parameter", "gradient", "optimizer_state", "activation", "temporary", "workspace"}

// All lists every category.
var All = []Category{Parameter, Gradient, OptimizerState, Activation, Temporary, Workspace, Unknown}

func (c Category) String() string {
	if c < numCategories {
		return names[c]
	}
	return "unknown"
}

// Parse returns the named category.
func Parse(s string) (Category, error) {
	for i, n := range names {
		if n == s {
			return Category(i), nil
		}
	}
	return Unknown, fmt.Errorf("unknown category %q (want one of %s)", s, strings.Join(names[:], ", "))
}

// Phase is the part of a training step a stack shows an allocation was
// made in.
type Phase uint8

const (
	PhaseOther     Phase = iota // forward, data loading, user code: no rule's frame
	PhaseInit                   // building or moving the model (parameters)
	PhaseBackward               // the autograd engine (its thread or backward())
	PhaseOptimizer              // an optimizer's step
	PhaseNone                   // no frames at all
)

// The frames each phase is recognized by. Either path separator; the
// innermost matching frame decides (an optimizer closure that calls
// backward allocates in backward).
var (
	// autograd: Python's entry into the engine; its native frames (an
	// autograd node, the engine and its device threads) are
	// replay/frames' to recognize (nativeBackward).
	backwardFile = regexp.MustCompile(`(^|[\\/])torch[\\/](autograd[\\/](graph|__init__|function)\.py|_tensor\.py)$`)
	backwardName = regexp.MustCompile(`^(_engine_run_backward|backward|grad|run_backward)$`)
	// optimizers: an optimizer's file (frames.OptimizerFile, where step
	// detection finds step calls too) or the step wrapper's profiler name
	optimName = regexp.MustCompile(`Optimizer\.step|^_?(fused|multi_tensor|single_tensor)_(adam|adamw|sgd|rmsprop|adagrad|lamb|lion)`)
	// parameters: nn.Module construction, .to()/.cuda()/.npu() (each
	// tensor goes through _apply's convert), init and state-dict loading
	initFile = regexp.MustCompile(`(^|[\\/])torch(_npu)?[\\/](nn[\\/](modules[\\/]module|parameter|init)|utils[\\/]_module)\.py$`)
	initName = regexp.MustCompile(`^(_apply|convert|to|cuda|npu|reset_parameters|_load_from_state_dict|load_state_dict|__init__|Module\.to)$`)
	// user code that builds or loads weights, in any file
	loadName = regexp.MustCompile(`(?i)^(_?init_?weights?\w*|load_(weights?|state_dict|checkpoint|model|pretrained)\w*|from_pretrained)$`)
	// an nn layer's constructor (torch/nn/modules/linear.py __init__)
	layerInit = regexp.MustCompile(`(^|[\\/])torch[\\/]nn[\\/]modules[\\/][^\\/]+\.py$`)
)

// PhaseOf is the phase a stack (innermost first) shows.
func PhaseOf(st snapshot.Stack) Phase { return phaseOf(st, nil) }

// frameName is a frame without its line, which no rule reads.
type frameName struct{ file, name string }

// phaseOf is PhaseOf, each frame's rule (frameRule) looked up in memo
// where it is not nil: stacks share most of their frames.
func phaseOf(st snapshot.Stack, memo map[frameName]Phase) Phase {
	if len(st) == 0 {
		return PhaseNone
	}
	for _, f := range st {
		var p Phase
		if memo == nil {
			p = frameRule(f)
		} else {
			k := frameName{f.Filename, f.Name}
			var ok bool
			if p, ok = memo[k]; !ok {
				p = frameRule(f)
				memo[k] = p
			}
		}
		if p != PhaseOther {
			return p
		}
	}
	return PhaseOther
}

// frameRule is the phase frame f shows, PhaseOther when no rule's frame.
func frameRule(f snapshot.Frame) Phase {
	switch {
	case frames.OptimizerFile(f.Filename) || optimName.MatchString(f.Name):
		return PhaseOptimizer
	case backwardName.MatchString(f.Name) && backwardFile.MatchString(f.Filename), nativeBackward(f):
		return PhaseBackward
	case initFile.MatchString(f.Filename) && initName.MatchString(f.Name),
		layerInit.MatchString(f.Filename) && (f.Name == "__init__" || f.Name == "reset_parameters"),
		loadName.MatchString(f.Name):
		return PhaseInit
	}
	return PhaseOther
}

// nativeBackward reports whether f is one of autograd's native frames: an
// autograd node's apply (torch::autograd::generated::BmmBackward0::apply,
// AccumulateGrad) or the engine's (torch::autograd::Engine::…, whose
// thread_main the backward threads run).
func nativeBackward(f snapshot.Frame) bool {
	if _, ok := frames.AutogradNode(f.Name); ok {
		return true
	}
	return frames.Backward(snapshot.Stack{f})
}

// Start is an allocation live before the first entry.
type Start struct {
	Addr   uint64
	Frames snapshot.StackID
}

// Table is the category of every allocation of one trace.
type Table struct {
	// entry is by trace index: at an alloc entry the category of the
	// allocation it makes, at a free entry that of the allocation it ends
	entry []Category
	start map[uint64]Category
}

// Of is the category of the allocation born at trace index born (-1: live
// before the trace, at addr).
func (t *Table) Of(born int, addr uint64) Category {
	if t == nil {
		return Unknown
	}
	if born < 0 {
		return t.start[addr]
	}
	if born < len(t.entry) {
		return t.entry[born]
	}
	return Unknown
}

// Entry is the category of the allocation entry i makes (an alloc
// entry) or ends (a free entry: free_requested, free_completed, free).
func (t *Table) Entry(i int) Category { return t.Of(i, 0) }

// counts are running counts of alloc entries by phase, taken when an
// allocation is born and compared when it dies: what was allocated while
// it lived.
type counts struct{ all, backward, optimizer, init int32 }

// liveAlloc is an allocation as the classifier keeps it, in its address's
// slot of classifier.addrs (32 bytes with the address: one lookup reads
// it whole).
type liveAlloc struct {
	at        counts
	idx       int32 // trace index; -1: before the trace
	phase     Phase
	workspace bool
	ended     uint8 // freed, waiting for the free's completion: ended | its category; 0 while live
}

// Classify gives every allocation of a device trace (entries, with start
// the allocations live before it) its category; stack resolves stack ids.
func Classify(entries []snapshot.TraceEntry, start []Start, stack func(snapshot.StackID) snapshot.Stack) *Table {
	c := newClassifier(len(entries), start, stack)
	for i := range entries {
		if e := &entries[i]; e.Action == snapshot.ActionAlloc && e.Frames != snapshot.NoStack {
			c.withFrames = true
			break
		}
	}
	c.startLive(start)
	for i := range entries {
		c.step(i, &entries[i])
	}
	return c.finish()
}

// ClassifyFunc is Classify over a log read entry by entry: entries from
// to n-1 (earlier ones are gone: a retention window), entry(i) the i-th;
// Table.Of takes the log's indices.
func ClassifyFunc(from, n int, entry func(i int) *snapshot.TraceEntry, start []Start, stack func(snapshot.StackID) snapshot.Stack) *Table {
	c := newClassifier(n, start, stack)
	for i := from; i < n; i++ {
		if e := entry(i); e.Action == snapshot.ActionAlloc && e.Frames != snapshot.NoStack {
			c.withFrames = true
			break
		}
	}
	c.startLive(start)
	for i := from; i < n; i++ {
		c.step(i, entry(i))
	}
	return c.finish()
}

// ended marks an address's allocation in classifier.addrs as freed,
// waiting for the free's completion; the low bits hold its category.
const ended = 0x80

// classifier is Classify's one pass: per address one table slot (the
// live allocation, or the category of a freed one until its free
// completes) and the phases by stack id in a slice: no allocation per
// entry.
type classifier struct {
	t     *Table
	stack func(snapshot.StackID) snapshot.Stack
	// With frames recorded, an allocation without any comes from a
	// thread that runs no Python: with stacks='python' that is the
	// autograd engine's device thread.
	withFrames bool
	phases     []Phase // by stack id; phaseUnknown: not yet looked at
	negPhases  map[snapshot.StackID]Phase
	frameMemo  map[frameName]Phase // frameRule by frame, across stacks
	addrs      addrmap.Map[liveAlloc]
	workspace  map[uint64]bool
	now        counts
}

const phaseUnknown Phase = 0xff

func newClassifier(n int, start []Start, stack func(snapshot.StackID) snapshot.Stack) *classifier {
	// liveAlloc.idx is an int32: a trace of 2^31 entries (144 GiB of
	// them) is not held in memory.
	return &classifier{
		t:         &Table{entry: make([]Category, n), start: make(map[uint64]Category, len(start))},
		stack:     stack,
		frameMemo: map[frameName]Phase{},
	}
}

// phase is the phase of stack id, looked up once per id.
func (c *classifier) phase(id snapshot.StackID) Phase {
	if id < 0 {
		p, ok := c.negPhases[id]
		if !ok {
			if c.negPhases == nil {
				c.negPhases = map[snapshot.StackID]Phase{}
			}
			p = phaseOf(c.stack(id), c.frameMemo)
			c.negPhases[id] = p
		}
		return p
	}
	if int(id) >= len(c.phases) {
		n := max(int(id)+1, 2*len(c.phases), 64)
		old := len(c.phases)
		c.phases = append(c.phases, make([]Phase, n-old)...)
		for j := old; j < n; j++ {
			c.phases[j] = phaseUnknown
		}
	}
	p := c.phases[id]
	if p == phaseUnknown {
		p = phaseOf(c.stack(id), c.frameMemo)
		c.phases[id] = p
	}
	return p
}

func (c *classifier) startLive(start []Start) {
	for _, s := range start {
		a := liveAlloc{idx: -1, phase: c.phase(s.Frames)}
		p, _ := c.addrs.Insert(s.Addr)
		*p = a // the last one at an address, as a map of them keeps
	}
}

func (c *classifier) step(i int, e *snapshot.TraceEntry) {
	switch e.Action {
	case snapshot.ActionWorkspaceSnapshot:
		if c.workspace == nil {
			c.workspace = map[uint64]bool{}
		}
		c.workspace[e.Addr] = true
	case snapshot.ActionAlloc:
		p := c.phase(e.Frames)
		if p == PhaseNone && c.withFrames {
			p = PhaseBackward
		}
		ws := false
		if len(c.workspace) > 0 {
			ws = c.workspace[e.Addr]
			delete(c.workspace, e.Addr)
		}
		a, added := c.addrs.Insert(e.Addr)
		if !added && a.ended == 0 {
			c.t.set(a, e.Addr, c.now, false) // a second alloc at a live address: the first is gone
		}
		*a = liveAlloc{idx: int32(i), phase: p, workspace: ws, at: c.now}
		c.now.all++
		switch p {
		case PhaseBackward:
			c.now.backward++
		case PhaseOptimizer:
			c.now.optimizer++
		case PhaseInit:
			c.now.init++
		}
	case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionFree:
		a := c.addrs.Ptr(e.Addr)
		if a == nil {
			return
		}
		var cat Category
		if a.ended == 0 {
			cat = c.t.set(a, e.Addr, c.now, false)
			a.ended = ended | uint8(cat)
		} else {
			cat = Category(a.ended &^ ended)
		}
		c.t.entry[i] = cat
		if e.Action != snapshot.ActionFreeRequested {
			c.addrs.Delete(e.Addr)
		}
	}
}

func (c *classifier) finish() *Table {
	for addr, a := range c.addrs.All() {
		if a.ended == 0 {
			c.t.set(a, addr, c.now, true)
		}
	}
	return c.t
}

func (t *Table) set(a *liveAlloc, addr uint64, now counts, never bool) Category {
	c := decide(a, now, never)
	if a.idx < 0 {
		t.start[addr] = c
	} else {
		t.entry[a.idx] = c
	}
	return c
}

// decide applies the rules (docs/explain.md, "Memory categories") to one
// allocation: a its birth, now the counts when it died (never: it is live
// at the end of the trace).
func decide(a *liveAlloc, now counts, never bool) Category {
	between := counts{now.all - a.at.all, now.backward - a.at.backward, now.optimizer - a.at.optimizer, now.init - a.at.init}
	if a.idx >= 0 {
		between.all-- // not itself
		switch a.phase {
		case PhaseBackward:
			between.backward--
		case PhaseOptimizer:
			between.optimizer--
		case PhaseInit:
			between.init--
		}
	}
	otherThanBackward := between.all - between.backward
	otherThanOptimizer := between.all - between.optimizer
	switch {
	case a.workspace:
		return Workspace
	case a.phase == PhaseInit:
		if never || between.all-between.init > 0 {
			return Parameter
		}
		return Temporary
	case a.phase == PhaseOptimizer:
		if never || otherThanOptimizer > 0 {
			return OptimizerState
		}
		return Temporary
	case a.phase == PhaseBackward:
		if never || otherThanBackward > 0 {
			return Gradient
		}
		return Temporary
	case a.phase == PhaseNone:
		// live before recording began (or a trace recorded without
		// frames): never freed is the lifetime of a parameter
		if never && a.idx < 0 {
			return Parameter
		}
		return Unknown
	}
	// forward and other user code
	switch {
	case between.backward > 0:
		return Activation
	case !never:
		return Temporary
	}
	return Unknown
}
