// Package snapshot is the memory snapshot data model. It mirrors the torch
// memory snapshot schema (docs/reference/snapshot-format.md §2) so that a
// decoded file and a live allocator snapshot are the same Go value. Sizes are
// int64, addresses and stream handles uint64, stacks are interned (entries
// hold a StackID into Snapshot.Stacks). It imports nothing of npumon's:
// readers, the Store and the TUI use it without the allocator algorithm.
package snapshot

import (
	"encoding/binary"
	"math"
	"strings"
	"sync"
)

// Action is the kind of a trace entry. Known actions are constants; actions
// the model does not know (newer torch, forks) are registered on first sight
// in the ActionTable of whoever decodes them.
type Action uint8

const (
	ActionAlloc             Action = iota // block handed to the caller; Size = requested bytes
	ActionFreeRequested                   // caller freed; other streams may still use it
	ActionFreeCompleted                   // block really back in the pool
	ActionFree                            // legacy single free (torch 1.13 / early 2.0)
	ActionSegmentAlloc                    // new device segment (aclrtMalloc)
	ActionSegmentFree                     // segment released (aclrtFree)
	ActionSegmentMap                      // expandable segment grew
	ActionSegmentUnmap                    // expandable pages unmapped
	ActionSnapshot                        // a snapshot was taken; Size = total active bytes
	ActionOOM                             // out of memory; DeviceFree set, Size = rounded request
	ActionUserDefined                     // torch 2.4 record_function annotation
	ActionAnnotate                        // _annotate_memory(ptr, text)
	ActionWorkspaceSnapshot               // torch_npu workspace allocator block (synthetic)
	// ActionMemoryRecord is npumon's own: a profiler memory_record total
	// (Size = allocated bytes at TimeUS), for sources with totals but no
	// block-level trace. torch never writes it.
	ActionMemoryRecord
	// ActionRestart and ActionResync are npumon's own marker entries of a
	// live Store: a new producer process took over the session (Addr holds
	// its pid), or a fresh snapshot from the same producer replaced the
	// state. torch never writes them.
	ActionRestart
	ActionResync
	numKnownActions
)

// knownActionNames are the serialized names of the known actions, by code.
var knownActionNames = [numKnownActions]string{
	"alloc", "free_requested", "free_completed", "free",
	"segment_alloc", "segment_free", "segment_map", "segment_unmap",
	"snapshot", "oom", "user_defined", "annotate", "workspace_snapshot",
	"memory_record", "restart", "resync",
}

// ActionOther stands for every unknown action once a table is full.
const ActionOther Action = 255

// maxActions caps an ActionTable so hostile files cannot grow it without bound.
const maxActions = 200

// ParseKnownAction returns the known Action a serialized action string
// names; ok is false for every other string.
func ParseKnownAction(s string) (a Action, ok bool) {
	for i, n := range knownActionNames {
		if n == s {
			return Action(i), true
		}
	}
	return 0, false
}

// String returns the action exactly as torch serializes it for a known
// action, and "other" for any other code: the name of an action registered
// in an ActionTable is that table's to tell (ActionTable.Name).
func (a Action) String() string {
	if a < numKnownActions {
		return knownActionNames[a]
	}
	return "other"
}

// ActionTable names the actions a source uses beyond the known ones (newer
// torch, forks, npumon's own synthetic entries), so they survive decoding
// and re-encoding and can be shown by name. A table belongs to whoever
// decodes with it (a snapshot, a Store, a wire connection): codes from two
// tables do not mean the same action, and one decode's strings never change
// another's codes. The zero value is not usable; call NewActionTable. A nil
// *ActionTable knows the known actions only (Parse gives ActionOther for
// any other name). It is safe for concurrent use.
type ActionTable struct {
	names interner // the registered names: code numKnownActions+i is names' i
}

// NewActionTable returns a table that knows only the known actions.
func NewActionTable() *ActionTable { return &ActionTable{} }

// Parse returns the Action for a serialized action string, registering an
// unknown name (up to a cap; beyond it ActionOther).
func (t *ActionTable) Parse(s string) Action {
	if a, ok := ParseKnownAction(s); ok {
		return a
	}
	if t == nil || s == "other" { // "other": what Name gives ActionOther
		return ActionOther
	}
	if i, ok := t.names.intern(s, maxActions-int(numKnownActions)); ok {
		return numKnownActions + Action(i)
	}
	return ActionOther
}

// Name returns the action as it was serialized: torch's name for a known
// action, the registered name for one of this table's codes, else "other".
func (t *ActionTable) Name(a Action) string {
	if a < numKnownActions || t == nil || a == ActionOther {
		return a.String()
	}
	if s, ok := t.names.name(uint32(a - numKnownActions)); ok {
		return s
	}
	return "other"
}

// Len returns the number of registered (unknown) actions.
func (t *ActionTable) Len() int {
	if t == nil {
		return 0
	}
	return t.names.len()
}

// Known reports whether the action is one the model gives meaning to.
func (a Action) Known() bool { return a < numKnownActions }

// IsAllocFamily reports whether the action belongs to the block alloc/free family.
func (a Action) IsAllocFamily() bool {
	switch a {
	case ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionFree:
		return true
	}
	return false
}

// IsSegmentFamily reports whether the action changes reserved memory.
func (a Action) IsSegmentFamily() bool {
	switch a {
	case ActionSegmentAlloc, ActionSegmentFree, ActionSegmentMap, ActionSegmentUnmap:
		return true
	}
	return false
}

// BlockState is the state of a block inside a segment.
type BlockState uint8

const (
	StateInactive          BlockState = iota // free, cached in a pool
	StateActiveAllocated                     // handed to a caller
	StateActivePendingFree                   // freed by the caller, waiting on stream events
)

var blockStateNames = [...]string{"inactive", "active_allocated", "active_pending_free"}

func (s BlockState) String() string {
	if int(s) < len(blockStateNames) {
		return blockStateNames[s]
	}
	return "unknown"
}

// ParseBlockState parses a serialized block state.
//
// Note [active_pending_free]
// torch's _snapshot docstring names the pending state "active_awaiting_free",
// but every writer — PyTorch's CUDA serializers, torch_npu, the XPU and MUSA
// forks — emits "active_pending_free", and PyTorch's memory viewer only
// checks that spelling. Both are accepted; npumon writes the emitted one.
func ParseBlockState(s string) (BlockState, bool) {
	switch s {
	case "inactive":
		return StateInactive, true
	case "active_allocated":
		return StateActiveAllocated, true
	case "active_pending_free", "active_awaiting_free":
		return StateActivePendingFree, true
	}
	return 0, false
}

// Active reports whether the block counts as active memory.
func (s BlockState) Active() bool { return s != StateInactive }

// Frame is one stack frame, innermost (allocation site) first in a Stack.
type Frame struct {
	Filename string
	Line     int64
	Name     string
}

// Stack is an ordered list of frames, innermost first.
type Stack []Frame

// StackID indexes Snapshot.Stacks. NoStack (0) is the empty stack.
type StackID int32

const NoStack StackID = 0

// PoolID identifies a memory pool; (0,0) is the default pool.
type PoolID [2]int64

// BlockHistory is a torch 1.13 / 2.0 block history record.
type BlockHistory struct {
	Addr     uint64
	RealSize int64
	Frames   StackID
}

// Block is a contiguous piece of a segment.
type Block struct {
	Address       uint64
	Size          int64
	RequestedSize int64
	State         BlockState
	Frames        StackID
	History       []BlockHistory // legacy files only
}

// Segment is one device allocation (or expandable mapping) tiled by blocks.
type Segment struct {
	Device        int
	Address       uint64
	TotalSize     int64
	AllocatedSize int64 // Σ size of active_allocated blocks
	ActiveSize    int64 // allocated + pending-free bytes
	RequestedSize int64 // Σ requested bytes of active blocks
	Stream        uint64
	IsLarge       bool // segment_type "large" (else "small")
	PoolID        PoolID
	HasPoolID     bool
	IsExpandable  bool
	Frames        StackID
	Blocks        []Block
}

// SegmentType returns the serialized pool name, "large" or "small".
func (s *Segment) SegmentType() string {
	if s.IsLarge {
		return "large"
	}
	return "small"
}

// End returns the first address past the segment.
func (s *Segment) End() uint64 { return s.Address + uint64(s.TotalSize) }

// TraceEntry is one allocator event. A replay holds millions of them, so
// it has no pointers (its strings are TextIDs, its frames a StackID: the
// collector never scans a trace) and its small fields come first (72 bytes).
type TraceEntry struct {
	Action     Action
	HasPoolID  bool
	Frames     StackID
	Addr       uint64 // 0 for oom and snapshot
	Size       int64
	Stream     uint64
	DeviceFree int64 // oom only: bytes the device reported free
	TimeUS     int64 // epoch microseconds; 0 when the source has no time
	PoolID     PoolID
	// Optional strings of newer torch builds, in the snapshot's Texts;
	// NoText when absent.
	CompileContext TextID
	UserMetadata   TextID
}

// Annotation is an external annotation (record_function range edge).
type Annotation struct {
	Name   string
	Stage  string // "START" or "END"
	Device int
	TimeUS int64
}

// Settings are the allocator settings a snapshot carries (torch ≥ 2.3).
type Settings struct {
	ConfKey                       string // e.g. "PYTORCH_CUDA_ALLOC_CONF" or "PYTORCH_NPU_ALLOC_CONF"
	Conf                          string // the raw configuration string
	MaxSplitSize                  int64  // -1 = unlimited
	GarbageCollectionThreshold    float64
	ExpandableSegments            bool
	PinnedNumRegisterThreads      int64
	ReleaseLockOnMalloc           bool
	PinnedUseHostRegister         bool
	GraphCaptureRecordStreamReuse bool
	// RoundupPower2Divisions maps an interval start in MiB (1, 2, 4, …) to
	// its number of divisions; nil when absent.
	RoundupPower2Divisions map[int64]int64
}

// Snapshot is a full memory snapshot: final segments plus per-device traces.
type Snapshot struct {
	Segments     []Segment
	DeviceTraces [][]TraceEntry // index = device ordinal, oldest first
	Settings     *Settings      // nil when the source has none
	// TorchNPU is true for a dump written by torch_npu (its round_size
	// pads requests by 32 bytes); the decoder decides it from the content.
	TorchNPU            bool
	ExternalAnnotations []Annotation
	// Stacks is the interned stack table; Stacks[NoStack] is empty.
	Stacks []Stack
	// Actions names the trace's actions beyond the known ones; nil when
	// there are none.
	Actions *ActionTable
	// Texts holds the strings trace entries name by TextID; nil when there
	// are none.
	Texts *TextTable
	// TimeExact is set where a trace's times were recovered from a
	// profiler run (monitor/align, docs/timerecovery.md): per device, per
	// entry, whether TimeUS is the entry's own time (true) or the lower
	// bound of the interval between the matched entries around it. nil, or
	// a nil device row, when the times are the trace's own.
	TimeExact [][]bool
	// Forward is the sparse side table of forward tracebacks (torch 2.8+
	// "forward_frames": the forward pass's traceback of an allocation made
	// in backward), by device ordinal then trace index; each a stack in
	// Stacks, innermost first like every stack. nil when no entry has one.
	// TraceEntry stays flat: few entries carry one.
	Forward []map[int]StackID
}

// TimeInterval returns the epoch µs between which entry i of device dev
// lies: its own time twice where the time is exact (or the trace's own),
// else the lower bound TimeUS holds and the time of the next exact entry
// (0 when there is none).
func (s *Snapshot) TimeInterval(dev, i int) (lo, hi int64) {
	tr := s.DeviceTraces[dev]
	t := tr[i].TimeUS
	if dev >= len(s.TimeExact) || s.TimeExact[dev] == nil || s.TimeExact[dev][i] {
		return t, t
	}
	ex := s.TimeExact[dev]
	for j := i + 1; j < len(tr) && j < len(ex); j++ {
		if ex[j] {
			return t, tr[j].TimeUS
		}
	}
	return t, 0
}

// ForwardStack returns the forward traceback of entry i of device dev's
// trace (nil when it has none).
func (s *Snapshot) ForwardStack(dev, i int) Stack {
	return s.Stack(s.ForwardID(dev, i))
}

// ForwardID returns the stack id of entry i's forward traceback on device
// dev (NoStack when it has none).
func (s *Snapshot) ForwardID(dev, i int) StackID {
	if dev < 0 || dev >= len(s.Forward) {
		return NoStack
	}
	return s.Forward[dev][i]
}

// Text returns the string id names in s.Texts ("" for NoText).
func (s *Snapshot) Text(id TextID) string { return s.Texts.Text(id) }

// ActionName returns the serialized name of a, a known action or one of
// s.Actions.
func (s *Snapshot) ActionName(a Action) string { return s.Actions.Name(a) }

// Stack returns the frames of id, or nil for NoStack or an id out of range.
func (s *Snapshot) Stack(id StackID) Stack {
	if id <= 0 || int(id) >= len(s.Stacks) {
		return nil
	}
	return s.Stacks[id]
}

// HasTimestamps reports whether any trace entry carries an epoch time.
func (s *Snapshot) HasTimestamps() bool {
	for _, tr := range s.DeviceTraces {
		for i := range tr {
			if tr[i].TimeUS != 0 {
				return true
			}
		}
	}
	return false
}

// Devices returns the device ordinals present in segments or traces, ascending.
func (s *Snapshot) Devices() []int {
	n := len(s.DeviceTraces)
	for i := range s.Segments {
		if s.Segments[i].Device+1 > n {
			n = s.Segments[i].Device + 1
		}
	}
	var out []int
	for d := 0; d < n; d++ {
		if d < len(s.DeviceTraces) && len(s.DeviceTraces[d]) > 0 {
			out = append(out, d)
			continue
		}
		for i := range s.Segments {
			if s.Segments[i].Device == d {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// TextID names a string of a TextTable; NoText is the empty string.
type TextID uint32

const NoText TextID = 0

// TextTable interns the optional strings of trace entries (compile
// context, user metadata): a table belongs to what decodes with it, like
// an ActionTable. A nil *TextTable holds only "". It is safe for
// concurrent use.
type TextTable struct {
	texts interner // the strings but "": TextID i+1 is texts' i
}

// NewTextTable returns a table holding only "".
func NewTextTable() *TextTable { return &TextTable{} }

// Intern returns the id of s, adding a copy when new; "" is NoText, as is
// every string for a nil table (it keeps none).
func (t *TextTable) Intern(s string) TextID {
	if s == "" || t == nil {
		return NoText
	}
	i, _ := t.texts.intern(s, math.MaxUint32-1)
	return TextID(i + 1)
}

// Text returns the string of id; "" for NoText, a nil table or an id it
// does not hold.
func (t *TextTable) Text(id TextID) string {
	if t == nil || id == NoText {
		return ""
	}
	s, _ := t.texts.name(uint32(id - 1))
	return s
}

// Len returns the number of strings, "" included.
func (t *TextTable) Len() int {
	if t == nil {
		return 1
	}
	return t.texts.len() + 1
}

// interner numbers strings in the order they come: the concurrent core of
// ActionTable and TextTable. The zero value is an empty interner.
type interner struct {
	mu    sync.RWMutex
	names []string
	index map[string]uint32
}

// intern returns s's number, adding a copy of s when it is new and fewer
// than limit strings are held (false when it is not and cannot be).
func (in *interner) intern(s string, limit int) (uint32, bool) {
	in.mu.RLock()
	i, ok := in.index[s]
	in.mu.RUnlock()
	if ok {
		return i, true
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if i, ok := in.index[s]; ok {
		return i, true
	}
	if len(in.names) >= limit {
		return 0, false
	}
	if in.index == nil {
		in.index = map[string]uint32{}
	}
	i = uint32(len(in.names))
	s = strings.Clone(s)
	in.names = append(in.names, s)
	in.index[s] = i
	return i, true
}

// name returns the string numbered i, false when there is none.
func (in *interner) name(i uint32) (string, bool) {
	in.mu.RLock()
	defer in.mu.RUnlock()
	if int64(i) < int64(len(in.names)) {
		return in.names[i], true
	}
	return "", false
}

func (in *interner) len() int {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return len(in.names)
}

// StackTable interns stacks so identical frame lists share one StackID.
// It is not safe for concurrent use.
type StackTable struct {
	stacks []Stack
	index  map[string]StackID
	key    []byte
}

// NewStackTable returns a table holding only the empty stack.
func NewStackTable() *StackTable {
	return &StackTable{stacks: []Stack{nil}, index: map[string]StackID{}}
}

// Intern returns the id of frames, adding a copy when new. Empty → NoStack.
func (t *StackTable) Intern(frames []Frame) StackID {
	if len(frames) == 0 {
		return NoStack
	}
	k := t.key[:0]
	for _, f := range frames {
		k = append(k, f.Filename...)
		k = append(k, 0)
		k = binary.LittleEndian.AppendUint64(k, uint64(f.Line))
		k = append(k, f.Name...)
		k = append(k, 0)
	}
	t.key = k
	if id, ok := t.index[string(k)]; ok {
		return id
	}
	id := StackID(len(t.stacks))
	t.stacks = append(t.stacks, append(Stack(nil), frames...))
	t.index[string(k)] = id
	return id
}

// Stacks returns the table; the caller must not modify it.
func (t *StackTable) Stacks() []Stack { return t.stacks }

// Len returns the number of stacks including the empty one.
func (t *StackTable) Len() int { return len(t.stacks) }

// RemapStacks rewrites every stack id in s (segments, blocks, traces) with
// m and drops its stack table: the ids are then the caller's.
func (s *Snapshot) RemapStacks(m func(StackID) StackID) {
	for i := range s.Segments {
		sg := &s.Segments[i]
		sg.Frames = m(sg.Frames)
		for j := range sg.Blocks {
			sg.Blocks[j].Frames = m(sg.Blocks[j].Frames)
		}
	}
	for _, tr := range s.DeviceTraces {
		for i := range tr {
			tr[i].Frames = m(tr[i].Frames)
		}
	}
	for _, fw := range s.Forward {
		for i, id := range fw {
			fw[i] = m(id)
		}
	}
	s.Stacks = nil
}
