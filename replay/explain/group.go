package explain

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/replay"
	"github.com/npumon/npumon/replay/category"
	"github.com/npumon/npumon/replay/frames"
)

// By is what live allocations are grouped by.
type By string

// Groupings.
const (
	ByCallsite By = "callsite" // the call site (frames.Rules.Callsite)
	ByStack    By = "stack"    // the whole stack
	ByOp       By = "op"       // the op running when it was allocated
	ByStream   By = "stream"
	BySize     By = "size" // size class
	// ByCategory is what the memory holds (replay/category): parameter,
	// gradient, optimizer_state, activation, temporary, workspace, unknown.
	ByCategory By = "category"
)

// Bys lists every grouping, in the order help texts show them.
var Bys = []By{ByCallsite, ByStack, ByOp, ByStream, BySize, ByCategory}

// ParseBy returns the named grouping.
func ParseBy(s string) (By, error) {
	for _, b := range Bys {
		if string(b) == s {
			return b, nil
		}
	}
	return "", fmt.Errorf("unknown grouping %q (want callsite, stack, op, stream, size or category)", s)
}

// DefaultLibraryPaths matches the files of library frames (the default of
// Grouper.Library): frames.DefaultLibraryPaths.
const DefaultLibraryPaths = frames.DefaultLibraryPaths

// Frame is a stack frame as the JSON outputs write it.
type Frame struct {
	Filename string `json:"filename"`
	Line     int64  `json:"line"`
	Name     string `json:"name"`
}

// Grouper groups live allocations.
type Grouper struct {
	By By
	// Library matches the files of library frames (frames.Rules); nil:
	// the default.
	Library *regexp.Regexp
	// Stack resolves stack ids (Snapshot.Stack or a Store's).
	Stack func(snapshot.StackID) snapshot.Stack
	// OpOf names the op an allocation born at a trace time belongs to
	// ("" when none); nil: no ops.
	OpOf func(timeUS int64) string
	// Category says what an allocation holds (Device.Categories); nil:
	// every allocation is "unknown".
	Category func(a *replay.Alloc) category.Category

	// keys caches the call site / stack key of each stack id (stacks are
	// shared, so a few hundred ids serve millions of allocations). A
	// Grouper is not safe for concurrent use.
	keys    map[stackPair]string
	keysFor By
}

// Rules are the frame rules of this grouper (its library paths).
func (g *Grouper) Rules() *frames.Rules { return &frames.Rules{Library: g.Library} }

// Callsite is the call site of a stack (frames.Rules.Callsite: the first
// user frame, else the autograd node, the ATen op, the innermost library
// frame). ok is false for an empty stack.
func (g *Grouper) Callsite(st snapshot.Stack) (frames.Site, bool) {
	return g.Rules().Callsite(st)
}

// NoStackKey is the key of allocations recorded without a stack.
const NoStackKey = "(no stack)"

// FrameKey is how a frame reads in a group key: "name (file:line)".
func FrameKey(f snapshot.Frame) string { return frames.Key(f) }

// sizeClasses are the upper bounds of the size classes (the small pool's
// 1 MiB, torch's 10 MiB rounding step, then decades).
var sizeClasses = []struct {
	below int64
	name  string
}{
	{1 << 20, "< 1 MiB"},
	{10 << 20, "1-10 MiB"},
	{100 << 20, "10-100 MiB"},
	{1 << 30, "100 MiB-1 GiB"},
	{10 << 30, "1-10 GiB"},
}

// SizeClass names the size class of n bytes.
func SizeClass(n int64) string {
	for _, c := range sizeClasses {
		if n < c.below {
			return c.name
		}
	}
	return ">= 10 GiB"
}

// Key is the group a live allocation belongs to.
func (g *Grouper) Key(a *replay.Alloc) string {
	switch g.By {
	case ByStack, ByCallsite:
		if g.keys == nil || g.keysFor != g.By {
			g.keys, g.keysFor = map[stackPair]string{}, g.By
		}
		p := stackPair{a.Frames, snapshot.NoStack}
		if g.By == ByCallsite {
			p.fwd = a.Forward
		}
		k, ok := g.keys[p]
		if !ok {
			k = g.stackKey(p.id, p.fwd)
			g.keys[p] = k
		}
		return k
	case ByOp:
		if g.OpOf != nil && a.Born >= 0 {
			if n := g.OpOf(a.BornTime); n != "" {
				return n
			}
		}
		return "(no op)"
	case ByStream:
		return "stream " + strconv.FormatUint(a.Stream, 10)
	case BySize:
		return SizeClass(a.Size)
	case ByCategory:
		if g.Category == nil {
			return category.Unknown.String()
		}
		return g.Category(a).String()
	}
	return g.stackKey(a.Frames, a.Forward)
}

// stackPair is an allocation's stack and forward traceback: what its call
// site depends on.
type stackPair struct{ id, fwd snapshot.StackID }

// stackKey is the call site or stack key of a stack id (with the forward
// traceback fwd for a call site).
func (g *Grouper) stackKey(id, fwd snapshot.StackID) string {
	switch g.By {
	case ByStack:
		st := g.stack(id)
		if len(st) == 0 {
			return NoStackKey
		}
		// The key starts at the first frame that is not native (the
		// unwinder and allocator frames every stack shares); a stack of
		// native frames only starts at its call site.
		from := frames.KeyStart(st)
		if from == len(st) {
			from = 0
			if s, _ := g.Callsite(st); s.Index >= 0 {
				from = s.Index
			}
		}
		k := ""
		for i, f := range st[from:] {
			if i > 0 {
				k += " < "
			}
			k += FrameKey(f)
		}
		return k
	}
	s, ok := g.Rules().CallsiteForward(g.stack(id), g.stack(fwd))
	if !ok {
		return NoStackKey
	}
	return s.Label
}

func (g *Grouper) stack(id snapshot.StackID) snapshot.Stack {
	if g.Stack == nil {
		return nil
	}
	return g.Stack(id)
}

// Group is the live allocations sharing one key.
type Group struct {
	Key          string  `json:"key"`
	Bytes        int64   `json:"bytes"`
	Share        float64 `json:"share"` // of the moment's active bytes (0…1)
	Count        int     `json:"count"`
	LargestBytes int64   `json:"largest_bytes"`
	// OldestIndex is the trace index of the group's oldest allocation (-1:
	// live before the trace); OldestTimeUS its epoch µs, null when unknown.
	OldestIndex  int     `json:"oldest_index"`
	OldestTimeUS *int64  `json:"oldest_time_us"`
	Frames       []Frame `json:"frames"` // the stack of the largest allocation, innermost first
	// Allocs are the members, largest first (for the TUI's drill-down).
	Allocs []replay.Alloc `json:"-"`
}

// Group groups live allocations, sorted by bytes (descending), then key.
// total is what Share divides by (the moment's active bytes); 0 uses Σ
// sizes.
func (g *Grouper) Group(live []replay.Alloc, total int64) []Group {
	idx := map[string]int{}
	out := []Group{}
	var sum int64
	for i := range live {
		a := &live[i]
		sum += a.Size
		k := g.Key(a)
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, Group{Key: k, OldestIndex: a.Born})
		}
		gr := &out[j]
		gr.Bytes += a.Size
		gr.Count++
		gr.Allocs = append(gr.Allocs, *a)
		gr.OldestIndex = min(gr.OldestIndex, a.Born)
	}
	if total == 0 {
		total = sum
	}
	for i := range out {
		gr := &out[i]
		slices.SortStableFunc(gr.Allocs, cmpLargest)
		big := &gr.Allocs[0]
		gr.LargestBytes = big.Size
		gr.Frames = g.Frames(big.Frames)
		for j := range gr.Allocs {
			if a := &gr.Allocs[j]; a.Born == gr.OldestIndex {
				if a.BornTime != 0 {
					gr.OldestTimeUS = &a.BornTime
				}
				break
			}
		}
		if total != 0 {
			gr.Share = float64(gr.Bytes) / float64(total)
		}
	}
	slices.SortStableFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// cmpLargest orders allocations largest first, then oldest, then by address.
func cmpLargest(x, y replay.Alloc) int {
	return cmp.Or(cmp.Compare(y.Size, x.Size), cmp.Compare(x.Born, y.Born), cmp.Compare(x.Addr, y.Addr))
}

// Frames converts a stack to its JSON form (never nil).
func (g *Grouper) Frames(id snapshot.StackID) []Frame {
	st := g.stack(id)
	out := make([]Frame, len(st))
	for i, f := range st {
		out[i] = Frame{f.Filename, f.Line, f.Name}
	}
	return out
}
