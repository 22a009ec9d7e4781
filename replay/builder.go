package replay

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/npumon/npumon/replay/tiling"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/internal/hugepage"
)

// This file turns container events (a dict got items, a list got elements)
// into model values. A dict learns what it is from its keys ("action" → a
// trace entry, "filename" → a frame, …) and fills that struct directly; a
// list learns its element type from its first typed element. Trace-entry,
// block, history, segment and annotation dicts are recycled once they are
// placed in their list, so decoding allocates per distinct value, not per
// pickle object.

type dictKind uint8

const (
	dUnknown dictKind = iota // no deciding key yet: pairs wait in pend
	dTop
	dSegment
	dBlock
	dHistory
	dFrame
	dTrace
	dAnnotation
)

var dictKindNames = [...]string{"plain", "snapshot", "segment", "block", "history", "frame", "trace entry", "annotation"}

func (k dictKind) String() string { return dictKindNames[k] }

// kindForKey returns the dict kind a key proves, or dUnknown.
func kindForKey(k string) dictKind {
	switch k {
	case "action", "device_free", "compile_context", "user_metadata", "pool_id", "forward_frames":
		return dTrace
	case "filename", "line", "fx_node_op", "fx_node_name", "fx_node_target", "fx_original_trace":
		return dFrame
	case "state":
		return dBlock
	case "real_size", "cpp_frames":
		return dHistory
	case "total_size", "blocks", "segment_type", "allocated_size", "active_size", "is_expandable", "segment_pool_id":
		return dSegment
	case "segments", "device_traces", "allocator_settings", "external_annotations", "host_segments", "host_traces":
		return dTop
	case "stage":
		return dAnnotation
	}
	return dUnknown
}

// maxDevices caps device ordinals and the number of device traces.
const maxDevices = 4096

// Field-presence bits, for defaults computed when a key is absent.
const (
	hasAddress = 1 << iota
	hasRequested
	hasAllocated
	hasActive
	hasDevice
)

type kv struct{ k, v val }

type dict struct {
	kind    dictKind
	gen     uint32
	seen    uint32
	memoRow uint32 // 1 + the memo row holding this dict, 0 if none
	fid     uint32 // frame dicts: 1 + the builder's frame id once placed, 0 if not (yet)
	pend    []kv   // pairs before the kind is known; all pairs of plain dicts

	// The payload of the dict's kind, allocated by decide and kept across
	// recycling, so a dict costs little until it knows what it is.
	te     *snapshot.TraceEntry
	fwd    snapshot.StackID // trace entries: the parsed "forward_frames", NoStack if none
	fr     *snapshot.Frame
	blk    *snapshot.Block
	hist   *snapshot.BlockHistory
	seg    *snapshot.Segment
	ann    *snapshot.Annotation
	blocks *list // segment "blocks"

	// top-level dict
	segs, traces, anns *list
	settings           *dict
}

type listKind uint8

const (
	lUnknown listKind = iota
	lFrames
	lSegments
	lBlocks
	lHistory
	lTraces
	lTraceLists
	lAnnotations
	lPlain // scalars or plain dicts: content is not kept
)

var listKindNames = [...]string{"empty", "frame", "segment", "block", "history", "trace entry", "trace", "annotation", "plain"}

func (k listKind) String() string { return listKindNames[k] }

var listOfDict = [...]listKind{dUnknown: lUnknown, dTop: lPlain, dSegment: lSegments, dBlock: lBlocks,
	dHistory: lHistory, dFrame: lFrames, dTrace: lTraces, dAnnotation: lAnnotations}

// dictOfList is the element kind of each typed list.
var dictOfList = [...]dictKind{lFrames: dFrame, lSegments: dSegment, lBlocks: dBlock, lHistory: dHistory,
	lTraces: dTrace, lAnnotations: dAnnotation, lTraceLists: dUnknown, lPlain: dUnknown}

type list struct {
	kind      listKind
	scalar    kind // first scalar seen, for error messages
	interned  bool
	noAddr    bool // some block had no "address"
	stack     snapshot.StackID
	memoRow   uint32   // 1 + the memo row holding this list, 0 if none
	fids      []uint32 // frame lists: the builder's frame ids (1-based), until interned
	*listMore          // set by setKind for every kind but frame, empty and plain lists, and for pending
}

// pendingItems are the dicts of unknown kind waiting for the list's kind.
func (l *list) pendingItems() []val {
	if l.listMore == nil {
		return nil
	}
	return l.pending
}

// takePending removes and returns the waiting dicts.
func (l *list) takePending() []val {
	p := l.pendingItems()
	if p != nil {
		l.pending = nil
	}
	return p
}

// listMore holds the element slices of the rarer list kinds, so the many
// frame lists stay small.
type listMore struct {
	segs     []snapshot.Segment
	blocks   []snapshot.Block
	hist     []snapshot.BlockHistory
	entries  []snapshot.TraceEntry
	lists    []*list
	anns     []snapshot.Annotation
	pending  []val                    // dicts of unknown kind waiting for the list's kind
	strs     []string                 // plain lists: the strings (forward_frames), at most maxListStrings
	fwd      map[int]snapshot.StackID // trace lists: entry index → forward traceback
	acc      *traceAcc                // streaming: the entries' running figures, entries not kept
	streamed int                      // streaming: entries handed to acc (acc itself may be the folder's) or to the sink
	sinkList int                      // 1 + the list's number for Options.Trace, 0 until its first entry
	firstOff int64                    // file offset where the list's entries began (capacity estimate)
}

// setKind fixes a list's kind.
func (l *list) setKind(k listKind) {
	l.kind = k
	if k != lFrames && k != lUnknown && k != lPlain && l.listMore == nil {
		l.listMore = &listMore{}
	}
}

// builder owns the model under construction.
type builder struct {
	stream  bool        // trace entries go to per-list accumulators, not into the model
	parFold bool        // streaming: fold beside the decoder (fold starts at the first entry)
	fold    *foldPipe   // streaming in parallel: the accumulators are the folder's until fold.wait
	sink    *traceSink  // streaming to Options.Trace (nil: to the accumulators)
	collect []foldEntry // streaming in a parallel decode's helper: the entries' folded fields, in order
	par     *parInput   // the file, for a parallel decode (pardecode.go); nil: sequential
	// A parallel decode's helper: the stack ids internStack returned in
	// this chunk, once each, in order, and 1 + each one's place in it.
	stackLog  []snapshot.StackID
	stackPos  []int32
	offset    func() int64 // input position, for capacity estimates; nil if unknown
	total     int64        // input size, -1 if unknown
	memo      *memo        // nil for JSON
	stacks    *snapshot.StackTable
	free      []*dict
	actions   map[string]snapshot.Action
	table     *snapshot.ActionTable // this decode's unknown actions
	actCache  [8]actCached
	actNext   uint8
	texts     *snapshot.TextTable // entries' strings; nil until one has any
	textCache textCached
	strs      map[string]internedStr

	// Frames are interned twice over: each distinct frame gets an id
	// (frameIDs, frameTab), and each distinct sequence of ids a StackID
	// (stackOf, keyed by the ids' bytes), so a frames list costs 4 bytes a
	// frame while it fills and is looked up without touching its strings.
	listSlab []list
	fidArena []uint32
	frameIDs map[snapshot.Frame]uint32
	frameTab []snapshot.Frame
	stackOf  map[string]snapshot.StackID
	key      []byte

	// schema evidence
	evidence                                                                                                     string // why schema decided as it did
	sawHistory, sawNoAddr, sawWorkspace, sawNPUConf, sawCUDAConf, sawTime, sawSettings, sawStream, sawStreamZero bool

	accs  []*traceAcc // streaming: per device, nil where the trace was empty
	lists []int       // streaming to a sink: per device, its list's number, -1 where none

	// Trace entries fastEntry decoded, waiting for their list to take them
	// (kEntry values index entryQ), and how many still wait.
	entryQ      []snapshot.TraceEntry
	entriesLive int

	// Memory budget: bytes of builders, memo rows and model values made so
	// far, against a limit proportional to the input, so hostile input
	// (a million empty dicts, a frame list of a million memo references)
	// fails instead of exhausting memory.
	used, limit int64
	maxMem      int64 // Options.MaxMemory: an absolute cap on limit (0: none)
	overErr     error
}

// Budget: memBase plus memPerByte bytes per input byte.
const (
	memBase    = 64 << 20
	memPerByte = 48
)

// charge counts n bytes against the budget; the decoder checks overErr.
func (b *builder) charge(n int64) {
	b.used += n
	if b.used > b.limit && b.total < 0 && b.offset != nil {
		// Unknown size: the budget follows the bytes read so far.
		b.limit = max(b.limit, memBase+memPerByte*b.offset())
		if b.maxMem > 0 {
			b.limit = min(b.limit, b.maxMem)
		}
	}
	if b.used > b.limit && b.overErr == nil && b.maxMem > 0 && b.limit == b.maxMem {
		b.overErr = fmt.Errorf("decoding would need more than the %d MiB memory limit set for it", b.limit>>20)
	}
	if b.used > b.limit && b.overErr == nil {
		b.overErr = fmt.Errorf("decoding would need more than %d MiB for this input (%d bytes per input byte); not a memory snapshot shape", b.limit>>20, memPerByte)
	}
}

// setLimit sizes the budget for an input of size bytes (-1: unknown, the
// budget then grows with the bytes read, see charge).
func (b *builder) setLimit(size int64) {
	b.limit = memBase + memPerByte*max(size, 0)
	if b.maxMem > 0 {
		b.limit = min(b.limit, b.maxMem)
	}
}

func newBuilder() *builder {
	return &builder{
		stacks:   snapshot.NewStackTable(),
		actions:  make(map[string]snapshot.Action),
		table:    snapshot.NewActionTable(),
		strs:     make(map[string]internedStr),
		frameIDs: make(map[snapshot.Frame]uint32),
		frameTab: []snapshot.Frame{{}},
		stackOf:  make(map[string]snapshot.StackID),
	}
}

// intern returns p as a string, sharing short repeated strings (keys,
// states, actions that a producer did not memoize), and the string's key
// code (traceKeyCode), which a string value carries in n.
func (b *builder) intern(p []byte) (string, uint64) {
	if len(p) > 64 {
		return string(p), 0
	}
	if s, ok := b.strs[string(p)]; ok {
		return s.s, s.code
	}
	s := string(p)
	c := traceKeyCode(s)
	if len(b.strs) < 1<<16 {
		b.strs[s] = internedStr{s, c}
	}
	return s, c
}

type internedStr struct {
	s    string
	code uint64
}

// Codes of the trace-entry keys. A string value made by the pickle decoder
// carries its code (0: none), so the millions of trace-entry fields are
// dispatched on an integer, not by comparing key strings.
const (
	tkAction = 1 + iota
	tkAddr
	tkSize
	tkStream
	tkDeviceFree
	tkTimeUS
	tkFrames
	tkCompileContext
	tkUserMetadata
	tkPoolID
	tkForwardFrames
)

func traceKeyCode(k string) uint64 {
	switch k {
	case "action":
		return tkAction
	case "addr":
		return tkAddr
	case "size":
		return tkSize
	case "stream":
		return tkStream
	case "device_free":
		return tkDeviceFree
	case "time_us":
		return tkTimeUS
	case "frames":
		return tkFrames
	case "compile_context":
		return tkCompileContext
	case "user_metadata":
		return tkUserMetadata
	case "pool_id":
		return tkPoolID
	case "forward_frames":
		return tkForwardFrames
	}
	return 0
}

func (b *builder) newDict() val {
	var d *dict
	if n := len(b.free); n > 0 {
		d = b.free[n-1]
		b.free = b.free[:n-1]
	} else {
		d = &dict{}
		b.charge(dictBytes)
	}
	return val{k: kDict, d: d, gen: d.gen}
}

// newList hands out lists from slabs: a snapshot makes one list per trace
// entry's frames, and most die as soon as they are interned.
func (b *builder) newList() *list {
	b.charge(listBytes)
	if len(b.listSlab) == 0 {
		b.listSlab = make([]list, 256)
	}
	l := &b.listSlab[0]
	b.listSlab = b.listSlab[1:]
	return l
}

// fidSpace returns fids with room for n more ids, carved from a shared
// arena (a frames list is filled by one APPENDS and dropped once interned).
func (b *builder) fidSpace(fids []uint32, n int) []uint32 {
	need := len(fids) + n
	if len(b.fidArena) < need {
		b.fidArena = make([]uint32, max(1<<16, need))
	}
	out := b.fidArena[:len(fids):need]
	copy(out, fids)
	b.fidArena = b.fidArena[need:]
	return out
}

// Approximate heap sizes charged against the budget.
const (
	dictBytes    = 160
	listBytes    = 96 + 200 // the list, and the listMore most lists never get
	payloadBytes = 160
	entryBytes   = int64(unsafe.Sizeof(snapshot.TraceEntry{}))
	elemBytes    = 64 // a frame, block, history record, annotation or list pointer
)

// recycle returns a consumed dict builder; memo references to it go stale.
func (b *builder) recycle(d *dict) {
	if r := d.memoRow; r != 0 && b.memo != nil && b.memo.row(r-1).v.d == d {
		b.memo.release(r)
	}
	pend := d.pend[:0]
	clear(d.pend)
	// The payload of the kind just placed was copied out; it starts empty
	// when the builder is reused.
	switch d.kind {
	case dTrace:
		*d.te = snapshot.TraceEntry{}
	case dBlock:
		*d.blk = snapshot.Block{}
	case dHistory:
		*d.hist = snapshot.BlockHistory{}
	case dSegment:
		*d.seg = snapshot.Segment{}
	case dAnnotation:
		*d.ann = snapshot.Annotation{}
	}
	*d = dict{gen: d.gen + 1, pend: pend, te: d.te, blk: d.blk, hist: d.hist, seg: d.seg, ann: d.ann}
	b.free = append(b.free, d)
}

func (b *builder) action(s string) snapshot.Action {
	// The action strings of a pickle are memoized: every entry's action
	// shares one of a few strings, found here by its bytes' address.
	p := unsafe.StringData(s)
	for i := range b.actCache {
		if c := &b.actCache[i]; c.p == p && c.n == len(s) && p != nil {
			return c.a
		}
	}
	a, ok := b.actions[s]
	if !ok {
		a = b.table.Parse(s)
		if len(b.actions) < 1024 {
			b.actions[s] = a
		}
		if a == snapshot.ActionWorkspaceSnapshot {
			b.sawWorkspace = true
		}
	}
	b.actCache[b.actNext%uint8(len(b.actCache))] = actCached{p, len(s), a}
	b.actNext++
	return a
}

// text returns the TextID of an entry's string in this decode's table.
// Producers write the same few strings on every entry ("N/A", ""), and
// the decoder shares their bytes, so the last one is known by its address.
func (b *builder) text(s string) snapshot.TextID {
	if s == "" {
		return snapshot.NoText
	}
	p := unsafe.StringData(s)
	if c := &b.textCache; c.p == p && c.n == len(s) {
		return c.id
	}
	if b.texts == nil {
		b.texts = snapshot.NewTextTable()
	}
	id := b.texts.Intern(s)
	b.charge(int64(len(s)) + 16)
	b.textCache = textCached{p, len(s), id}
	return id
}

// textCached is the string text last looked up: its bytes' address,
// length and id.
type textCached struct {
	p  *byte
	n  int
	id snapshot.TextID
}

// actCached is a recently used action string: its bytes' address, length
// and action.
type actCached struct {
	p *byte
	n int
	a snapshot.Action
}

// setItems applies key/value pairs to a dict.
func (b *builder) setItems(dv val, items []val) error {
	if len(items)%2 != 0 {
		return fmt.Errorf("dict items come in pairs, got %d values", len(items))
	}
	d := dv.d
	if dv.gen != d.gen {
		return fmt.Errorf("a dict is filled after it was placed elsewhere")
	}
	for i := 0; i < len(items); i += 2 {
		k, v := &items[i], &items[i+1]
		if d.kind == dUnknown {
			if k.k == kStr {
				if kk := kindForKey(k.s); kk != dUnknown {
					if err := b.decide(d, kk); err != nil {
						return err
					}
					if err := b.set(d, k.s, v); err != nil {
						return err
					}
					continue
				}
			}
			if len(d.pend) >= 1<<16 {
				return fmt.Errorf("plain dict with more than %d keys", 1<<16)
			}
			d.pend = append(d.pend, kv{*k, *v})
			continue
		}
		if k.k != kStr {
			return fmt.Errorf("%s dict has a %s key; keys are strings", d.kind, k.k)
		}
		if d.kind == dTrace && k.n != 0 {
			if err := b.setTrace(d, k.n, k.s, v); err != nil {
				return err
			}
			continue
		}
		if err := b.set(d, k.s, v); err != nil {
			return err
		}
	}
	return nil
}

// decide fixes a dict's kind and applies the pairs that waited for it.
func (b *builder) decide(d *dict, k dictKind) error {
	if d.kind == k {
		return nil
	}
	if d.kind != dUnknown {
		return fmt.Errorf("want a %s dict, got a %s dict", k, d.kind)
	}
	d.kind = k
	b.charge(payloadBytes)
	switch k {
	case dTrace:
		if d.te == nil {
			d.te = new(snapshot.TraceEntry)
		}
	case dFrame:
		if d.fr == nil {
			d.fr = new(snapshot.Frame)
		}
	case dBlock:
		if d.blk == nil {
			d.blk = new(snapshot.Block)
		}
	case dHistory:
		if d.hist == nil {
			d.hist = new(snapshot.BlockHistory)
		}
	case dSegment:
		if d.seg == nil {
			d.seg = new(snapshot.Segment)
		}
	case dAnnotation:
		if d.ann == nil {
			d.ann = new(snapshot.Annotation)
		}
	}
	pend := d.pend
	d.pend = d.pend[:0]
	for i := range pend {
		p := &pend[i]
		if p.k.k != kStr {
			return fmt.Errorf("%s dict has a %s key; keys are strings", d.kind, p.k.k)
		}
		if err := b.set(d, p.k.s, &p.v); err != nil {
			return err
		}
	}
	clear(pend)
	return nil
}

// fieldError names the dict kind, key and the type mismatch.
func fieldError(d *dict, key, want string, v *val) error {
	return keyErrorf(d, key, "want %s, got %s", want, v.k)
}

// keyError is a bad value under one key of a snapshot dict; safefile.OffsetError
// reports it as its Field.
type keyError struct {
	kind, key string
	err       error
}

func (e *keyError) Error() string { return fmt.Sprintf("%s key %q: %v", e.kind, e.key, e.err) }
func (e *keyError) Unwrap() error { return e.err }

// field is the key as safefile.OffsetError.Field names it: "block.size".
func (e *keyError) field() string { return e.kind + "." + e.key }

// keyErrorf is a keyError for key of d.
func keyErrorf(d *dict, key, format string, args ...any) error {
	return &keyError{kind: d.kind.String(), key: key, err: fmt.Errorf(format, args...)}
}

func (b *builder) i64(d *dict, key string, v *val) (int64, error) {
	if x, ok := v.int64(); ok {
		return x, nil
	}
	if v.k == kUint {
		return 0, keyErrorf(d, key, "%d does not fit a signed 64-bit size", v.n)
	}
	return 0, fieldError(d, key, "int", v)
}

// device reads a device ordinal (0 … maxDevices-1).
func (b *builder) device(d *dict, key string, v *val) (int, error) {
	x, err := b.i64(d, key, v)
	if err == nil && (x < 0 || x >= maxDevices) {
		return 0, keyErrorf(d, key, "%d is not a device ordinal", x)
	}
	return int(x), err
}

func (b *builder) u64(d *dict, key string, v *val) (uint64, error) {
	if x, ok := v.uint64(); ok {
		return x, nil
	}
	return 0, fieldError(d, key, "int", v)
}

func (b *builder) str(d *dict, key string, v *val) (string, error) {
	if v.k == kStr {
		return v.s, nil
	}
	if v.k == kNone {
		return "", nil
	}
	return "", fieldError(d, key, "str", v)
}

func (b *builder) boolean(d *dict, key string, v *val) (bool, error) {
	switch v.k {
	case kBool, kInt:
		return v.n != 0, nil
	}
	return false, fieldError(d, key, "bool", v)
}

func (b *builder) pool(d *dict, key string, v *val) (snapshot.PoolID, error) {
	if v.k == kPair {
		return snapshot.PoolID{int64(v.n), int64(v.m)}, nil
	}
	return snapshot.PoolID{}, fieldError(d, key, "a (int, int) tuple", v)
}

// frames interns a frames list. Once interned, the list's memo row gives
// way to its stack id (memo.interned): the list itself is no longer kept.
func (b *builder) frames(d *dict, key string, v *val) (snapshot.StackID, error) {
	switch v.k {
	case kNone:
		return snapshot.NoStack, nil
	case kStack:
		return snapshot.StackID(v.n), nil
	case kList:
	default:
		return 0, fieldError(d, key, "a list of frames", v)
	}
	l := v.l
	if err := b.ensureList(l, lFrames); err != nil {
		return 0, keyErrorf(d, key, "%w", err)
	}
	if !l.interned {
		l.stack = b.internStack(l.fids)
		l.interned = true
		l.fids = nil
	}
	if l.memoRow != 0 && b.memo != nil {
		b.memo.interned(l)
	}
	return l.stack, nil
}

// frameID returns the id of a frame dict's content (1-based), cached on
// the dict until the dict changes.
func (b *builder) frameID(d *dict) uint32 {
	if d.fid != 0 {
		return d.fid
	}
	id, ok := b.frameIDs[*d.fr]
	if !ok {
		id = uint32(len(b.frameTab))
		b.frameTab = append(b.frameTab, *d.fr)
		b.frameIDs[*d.fr] = id
	}
	d.fid = id
	return id
}

// internStack returns the StackID of a sequence of frame ids.
func (b *builder) internStack(fids []uint32) snapshot.StackID {
	if len(fids) == 0 {
		return snapshot.NoStack
	}
	k := b.key[:0]
	for _, f := range fids {
		k = binary.LittleEndian.AppendUint32(k, f)
	}
	b.key = k
	if id, ok := b.stackOf[string(k)]; ok {
		if b.stackPos != nil {
			b.logStack(id)
		}
		return id
	}
	frames := make([]snapshot.Frame, len(fids))
	for i, f := range fids {
		frames[i] = b.frameTab[f]
	}
	id := b.stacks.Intern(frames)
	b.stackOf[string(k)] = id
	if b.stackPos != nil {
		b.logStack(id)
	}
	return id
}

func (b *builder) listOf(d *dict, key string, v *val, k listKind) (*list, error) {
	if v.k == kStack {
		l := v.asList()
		v = &l
	}
	if v.k == kNone {
		l := &list{}
		l.setKind(k)
		return l, nil
	}
	if v.k != kList {
		return nil, fieldError(d, key, "a list", v)
	}
	if err := b.ensureList(v.l, k); err != nil {
		return nil, keyErrorf(d, key, "%w", err)
	}
	return v.l, nil
}

// set stores one field of a dict whose kind is known. Unknown keys are
// ignored: newer producers add fields.
func (b *builder) set(d *dict, key string, v *val) (err error) {
	switch d.kind {
	case dTrace:
		if c := traceKeyCode(key); c != 0 {
			return b.setTrace(d, c, key, v)
		}
	case dFrame:
		f := d.fr
		d.fid = 0
		switch key {
		case "filename":
			f.Filename, err = b.str(d, key, v)
		case "line":
			f.Line, err = b.i64(d, key, v)
		case "name":
			f.Name, err = b.str(d, key, v)
		}
	case dBlock:
		k := d.blk
		switch key {
		case "address":
			k.Address, err = b.u64(d, key, v)
			d.seen |= hasAddress
		case "size":
			k.Size, err = b.i64(d, key, v)
		case "requested_size":
			k.RequestedSize, err = b.i64(d, key, v)
			d.seen |= hasRequested
		case "state":
			var s string
			if s, err = b.str(d, key, v); err == nil {
				st, ok := snapshot.ParseBlockState(s)
				if !ok {
					return keyErrorf(d, key, "unknown state %q", s)
				}
				k.State = st
			}
		case "frames":
			k.Frames, err = b.frames(d, key, v)
		case "history":
			var l *list
			if l, err = b.listOf(d, key, v, lHistory); err == nil {
				k.History = l.hist
				b.sawHistory = b.sawHistory || len(l.hist) > 0
			}
		}
	case dHistory:
		h := d.hist
		switch key {
		case "addr":
			h.Addr, err = b.u64(d, key, v)
		case "real_size":
			h.RealSize, err = b.i64(d, key, v)
		case "frames":
			h.Frames, err = b.frames(d, key, v)
		}
	case dSegment:
		s := d.seg
		switch key {
		case "device":
			s.Device, err = b.device(d, key, v)
		case "address":
			s.Address, err = b.u64(d, key, v)
		case "total_size":
			s.TotalSize, err = b.i64(d, key, v)
		case "allocated_size":
			s.AllocatedSize, err = b.i64(d, key, v)
			d.seen |= hasAllocated
		case "active_size":
			s.ActiveSize, err = b.i64(d, key, v)
			d.seen |= hasActive
		case "requested_size":
			s.RequestedSize, err = b.i64(d, key, v)
			d.seen |= hasRequested
		case "stream":
			s.Stream, err = b.u64(d, key, v)
			b.sawStream = b.sawStream || s.Stream != 0
			b.sawStreamZero = b.sawStreamZero || (err == nil && s.Stream == 0)
		case "segment_type":
			var t string
			if t, err = b.str(d, key, v); err == nil {
				s.IsLarge = t == "large"
			}
		case "segment_pool_id":
			if v.k != kNone {
				s.PoolID, err = b.pool(d, key, v)
				s.HasPoolID = err == nil
			}
		case "is_expandable":
			s.IsExpandable, err = b.boolean(d, key, v)
		case "frames":
			s.Frames, err = b.frames(d, key, v)
		case "blocks":
			d.blocks, err = b.listOf(d, key, v, lBlocks)
		}
	case dAnnotation:
		a := d.ann
		switch key {
		case "name":
			a.Name, err = b.str(d, key, v)
		case "stage":
			a.Stage, err = b.str(d, key, v)
		case "device":
			a.Device, err = b.device(d, key, v)
		case "time_us":
			a.TimeUS, err = b.i64(d, key, v)
		}
	case dTop:
		switch key {
		case "segments":
			d.segs, err = b.listOf(d, key, v, lSegments)
		case "device_traces":
			d.traces, err = b.listOf(d, key, v, lTraceLists)
		case "external_annotations":
			d.anns, err = b.listOf(d, key, v, lAnnotations)
		case "allocator_settings":
			if v.k == kDict {
				if v.gen != v.d.gen || v.d.kind != dUnknown {
					return fieldError(d, key, "a plain dict", v)
				}
				d.settings = v.d
			} else if v.k != kNone {
				return fieldError(d, key, "dict", v)
			}
		}
	}
	return err
}

// setTrace stores the trace-entry field of key code c (traceKeyCode).
func (b *builder) setTrace(d *dict, c uint64, key string, v *val) (err error) {
	e := d.te
	switch c {
	case tkAction:
		var s string
		if s, err = b.str(d, key, v); err == nil {
			e.Action = b.action(s)
		}
	case tkAddr:
		e.Addr, err = b.u64(d, key, v)
	case tkSize:
		e.Size, err = b.i64(d, key, v)
	case tkStream:
		e.Stream, err = b.u64(d, key, v)
		b.sawStream = b.sawStream || e.Stream != 0
		b.sawStreamZero = b.sawStreamZero || (err == nil && e.Stream == 0)
	case tkDeviceFree:
		e.DeviceFree, err = b.i64(d, key, v)
	case tkTimeUS:
		if v.k != kNone {
			e.TimeUS, err = b.i64(d, key, v)
			b.sawTime = true
		}
	case tkFrames:
		e.Frames, err = b.frames(d, key, v)
	case tkCompileContext:
		var s string
		if s, err = b.str(d, key, v); err == nil {
			e.CompileContext = b.text(s)
		}
	case tkUserMetadata:
		var s string
		if s, err = b.str(d, key, v); err == nil {
			e.UserMetadata = b.text(s)
		}
	case tkPoolID:
		if v.k != kNone {
			e.PoolID, err = b.pool(d, key, v)
			e.HasPoolID = err == nil
		}
	case tkForwardFrames:
		d.fwd, err = b.forwardFrames(d, key, v)
	}
	return err
}

// maxListStrings bounds the strings a plain list keeps (a forward
// traceback is tens of lines; more are dropped, not an error).
const maxListStrings = 4096

// forwardFrames interns a "forward_frames" list of traceback strings
// (parseForwardFrames) as a stack; None or an empty list is none.
func (b *builder) forwardFrames(d *dict, key string, v *val) (snapshot.StackID, error) {
	if v.k == kNone {
		return snapshot.NoStack, nil
	}
	if v.k != kList {
		return 0, fieldError(d, key, "a list of strings", v)
	}
	l := v.l
	if l.kind != lPlain && l.kind != lUnknown {
		return 0, keyErrorf(d, key, "want a list of strings, got a list of %ss", l.kind)
	}
	if l.listMore == nil || len(l.strs) == 0 {
		if l.scalar != kNone && l.scalar != kStr {
			return 0, keyErrorf(d, key, "want a list of strings, got a list of %s", l.scalar)
		}
		return snapshot.NoStack, nil
	}
	return b.stacks.Intern(parseForwardFrames(l.strs)), nil
}

// ensureList gives an untyped list its kind (converting waiting elements)
// or checks a typed list's kind.
func (b *builder) ensureList(l *list, k listKind) error {
	if l.kind == k {
		return nil
	}
	if l.kind == lUnknown {
		if l.scalar != kNone {
			return fmt.Errorf("want a list of %s dicts, got a list of %s", k, l.scalar)
		}
		l.setKind(k)
		return b.appendItems(l, l.takePending())
	}
	return fmt.Errorf("want a list of %ss, got a list of %ss", k, l.kind)
}

// appendItems adds elements to a list.
func (b *builder) appendItems(l *list, items []val) error {
	if l.kind == lFrames && !l.interned {
		// The common case, a frames list filled by one APPENDS: frame dicts
		// already placed before (shared through the memo) become their ids
		// here; anything else goes the general way from the first other item.
		if cap(l.fids)-len(l.fids) < len(items) {
			l.fids = b.fidSpace(l.fids, len(items))
		}
		for len(items) > 0 {
			it := &items[0]
			if it.k != kDict || it.gen != it.d.gen || it.d.kind != dFrame || it.d.fid == 0 {
				break
			}
			b.charge(elemBytes)
			l.fids = append(l.fids, it.d.fid)
			items = items[1:]
		}
	}
	for i := range items {
		if i == 1 && l.kind == lFrames && !l.interned && cap(l.fids)-len(l.fids) < len(items)-1 {
			l.fids = b.fidSpace(l.fids, len(items)-1)
		}
		if err := b.appendOne(l, items[i]); err != nil {
			return fmt.Errorf("list item %d: %w", l.length(), err)
		}
	}
	return nil
}

func (l *list) length() int {
	n := len(l.fids) + len(l.pendingItems())
	if m := l.listMore; m != nil {
		n += len(m.segs) + len(m.blocks) + len(m.hist) + len(m.entries) + len(m.lists) + len(m.anns)
		n += m.streamed
	}
	return n
}

func (b *builder) appendOne(l *list, v val) error {
	switch v.k {
	case kStack:
		v = v.asList()
	case kEntry:
		if l.untyped() {
			l.setKind(lTraces)
		}
		if l.kind == lTraces {
			b.placeEntry(l, v.n)
			return nil
		}
		v = b.materialize(v)
	}
	switch v.k {
	case kDict:
		d := v.d
		if v.gen != d.gen {
			return fmt.Errorf("a %s dict is placed twice", d.kind)
		}
		if l.kind == lUnknown {
			if d.kind == dUnknown {
				if l.listMore == nil {
					l.listMore = &listMore{}
				}
				l.pending = append(l.pending, v)
				return nil
			}
			l.setKind(listOfDict[d.kind])
			if pending := l.takePending(); len(pending) > 0 {
				if err := b.appendItems(l, pending); err != nil {
					return err
				}
			}
		}
		return b.place(l, d)
	case kList:
		if l.kind == lUnknown && l.scalar == kNone && len(l.pendingItems()) == 0 {
			l.setKind(lTraceLists)
		}
		if l.kind != lTraceLists {
			if l.kind == lPlain {
				return nil
			}
			return fmt.Errorf("want a %s dict, got a list", l.kind)
		}
		if len(l.lists) >= maxDevices {
			return fmt.Errorf("more than %d device traces", maxDevices)
		}
		b.charge(elemBytes)
		l.lists = append(l.lists, v.l)
		return nil
	default:
		switch l.kind {
		case lUnknown:
			if l.scalar == kNone {
				l.scalar = v.k
			}
			if len(l.pendingItems()) == 0 {
				l.setKind(lPlain)
			}
			b.keepString(l, &v)
			return nil
		case lPlain:
			b.keepString(l, &v)
			return nil
		}
		return fmt.Errorf("want a %s dict, got %s", l.kind, v.k)
	}
}

// keepString keeps a string element of a plain list (a trace entry's
// "forward_frames" is one), bounded and charged.
func (b *builder) keepString(l *list, v *val) {
	if v.k != kStr || l.scalar != kStr {
		return
	}
	if l.listMore == nil {
		l.listMore = &listMore{}
	}
	if len(l.strs) < maxListStrings {
		b.charge(elemBytes + int64(len(v.s)))
		l.strs = append(l.strs, v.s)
	}
}

// place moves a dict into a typed list and recycles its builder.
func (b *builder) place(l *list, d *dict) error {
	if d.kind == dTrace {
		b.charge(entryBytes)
	} else {
		b.charge(elemBytes)
	}
	switch l.kind {
	case lPlain:
		return nil
	case lTraceLists:
		return fmt.Errorf("want a trace list, got a %s dict", d.kind)
	}
	if err := b.decide(d, dictOfList[l.kind]); err != nil {
		return err
	}
	switch d.kind {
	case dFrame:
		// Frame dicts are shared through the memo: never recycled.
		if l.interned {
			return nil // an interned list no longer changes (as before, its stack is fixed)
		}
		l.fids = append(l.fids, b.frameID(d))
		return nil
	case dTrace:
		if d.fwd != snapshot.NoStack && (!b.stream || b.sink != nil) {
			if l.fwd == nil {
				l.fwd = map[int]snapshot.StackID{}
			}
			b.charge(elemBytes)
			l.fwd[len(l.entries)+l.streamed] = d.fwd // one of the two is 0
		}
		b.keepEntry(l, d.te)
	case dBlock:
		if d.seen&hasAddress == 0 {
			l.noAddr = true
			b.sawNoAddr = true
		}
		blk := *d.blk
		if d.seen&hasRequested == 0 && blk.State.Active() {
			blk.RequestedSize = tiling.LiveSize(&blk)
		}
		l.blocks = append(l.blocks, blk)
	case dHistory:
		l.hist = append(l.hist, *d.hist)
	case dSegment:
		l.segs = append(l.segs, b.finishSegment(d))
	case dAnnotation:
		l.anns = append(l.anns, *d.ann)
	}
	b.recycle(d)
	return nil
}

// keepEntry adds a trace entry to list l: to the TraceSink (Options.Trace),
// to its running figures when streaming, else to its entries.
func (b *builder) keepEntry(l *list, e *snapshot.TraceEntry) {
	if b.sink != nil {
		b.sinkEntry(l, e)
		return
	}
	if b.stream {
		if b.collect != nil {
			l.streamed++
			b.collect = append(b.collect, foldEntry{addr: e.Addr, stream: e.Stream, size: e.Size, time: e.TimeUS, frames: e.Frames, action: e.Action})
			return
		}
		if l.acc == nil {
			l.acc = newTraceAcc()
		}
		l.streamed++
		if b.parFold {
			if b.fold == nil {
				b.fold = newFoldPipe()
			}
			foldAdd(b.fold, l.acc, e)
			return
		}
		l.acc.add(e)
		return
	}
	if len(l.entries) == cap(l.entries) {
		b.growEntries(l)
	}
	l.entries = append(l.entries, *e)
}

// minEntryBytes is a floor on the bytes one trace entry takes in a file;
// it bounds capacity estimates against hostile input.
const minEntryBytes = 24

// growEntries makes room in a trace list. Once a few thousand entries show
// how many bytes an entry takes, the rest of the file is assumed to be this
// trace and the slice is sized for it in one step (+6 %); before that, and
// if the estimate falls short, capacity doubles. Go's own growth (1.25× for
// large slices) would copy the trace five times over and leave the copies
// to the collector.
func (b *builder) growEntries(l *list) {
	n := len(l.entries)
	if n == 0 && b.offset != nil {
		l.firstOff = b.offset()
	}
	newCap := max(1024, 2*n)
	if n >= 4096 && b.offset != nil && b.total > 0 {
		used := b.offset() - l.firstOff
		if left := b.total - b.offset(); used > 0 && left > 0 {
			perEntry := max(used/int64(n), minEntryBytes)
			est := n + int(left/perEntry) + int(left/perEntry)/16 + 1024
			if est > n {
				newCap = est
			}
		}
	}
	grown := make([]snapshot.TraceEntry, n, newCap)
	hugepage.Advise(grown) // before the copy touches it: 2 MiB faults, not 4 KiB
	copy(grown, l.entries)
	l.entries = grown
}

// finishSegment completes a segment: block addresses for files that have
// none (running sum from the segment base) and aggregates that are absent.
func (b *builder) finishSegment(d *dict) snapshot.Segment {
	s := *d.seg
	if d.blocks != nil {
		s.Blocks = d.blocks.blocks
		if d.blocks.noAddr {
			a := s.Address
			for i := range s.Blocks {
				s.Blocks[i].Address = a
				a += uint64(s.Blocks[i].Size)
			}
		}
	}
	var alloc, active, req int64
	for i := range s.Blocks {
		bl := &s.Blocks[i]
		if bl.State == snapshot.StateActiveAllocated {
			alloc += bl.Size
		}
		if bl.State.Active() {
			active += bl.Size
			req += bl.RequestedSize
		}
	}
	if d.seen&hasAllocated == 0 {
		s.AllocatedSize = alloc
	}
	if d.seen&hasActive == 0 {
		s.ActiveSize = active
	}
	if d.seen&hasRequested == 0 {
		s.RequestedSize = req
	}
	return s
}

// finish turns the pickle's top value into a snapshot and names its schema.
func (b *builder) finish(top val) (*snapshot.Snapshot, string, error) {
	snap := &snapshot.Snapshot{Texts: b.texts}
	if b.table.Len() > 0 {
		snap.Actions = b.table
	}
	schema := ""
	top = top.asList()
	switch top.k {
	case kList:
		if err := b.ensureList(top.l, lSegments); err != nil {
			return nil, "", fmt.Errorf("%w: top-level %w", ErrNotSnapshot, err)
		}
		snap.Segments = top.l.segs
		schema, b.evidence = SchemaTorch113, "a bare list of segments (the torch 1.13 layout)"
	case kDict:
		d := top.d
		if top.gen != d.gen {
			return nil, "", fmt.Errorf("%w: top-level dict was reused", ErrNotSnapshot)
		}
		if err := b.decide(d, dTop); err != nil {
			return nil, "", fmt.Errorf("%w: top level: %w", ErrNotSnapshot, err)
		}
		if d.segs == nil {
			return nil, "", fmt.Errorf("%w: top-level dict has no \"segments\"", ErrNotSnapshot)
		}
		snap.Segments = d.segs.segs
		if d.traces != nil {
			for i, l := range d.traces.lists {
				if err := b.ensureList(l, lTraces); err != nil {
					return nil, "", fmt.Errorf("device_traces[%d]: %w", i, err)
				}
				snap.DeviceTraces = append(snap.DeviceTraces, l.entries)
				if l.fwd != nil {
					for len(snap.Forward) < i {
						snap.Forward = append(snap.Forward, nil)
					}
					snap.Forward = append(snap.Forward, l.fwd)
				}
				b.accs = append(b.accs, l.acc)
				b.lists = append(b.lists, l.sinkList-1) // ensureList made listMore
			}
		}
		if d.anns != nil {
			// Present but empty stays non-nil, so export writes the key back.
			snap.ExternalAnnotations = append([]snapshot.Annotation{}, d.anns.anns...)
		}
		if d.settings != nil {
			st, err := b.settings(d.settings)
			if err != nil {
				return nil, "", fmt.Errorf("allocator_settings: %w", err)
			}
			snap.Settings = st
		}
		schema, b.evidence = b.schema(b.stacks.Stacks())
	default:
		return nil, "", fmt.Errorf("%w: the top-level value is a %s, not a dict or a list of segments", ErrNotSnapshot, top.k)
	}
	snap.Stacks = b.stacks.Stacks()
	return snap, schema, nil
}

// Schema names reported by Capture.Schema.
const (
	SchemaTorch113 = "torch-1.13"
	SchemaTorch20  = "torch-2.0"
	SchemaTorch21  = "torch-2.1+"
	SchemaTorchNPU = "torch_npu"
)

// schema classifies a dict snapshot from what the decoder saw and says
// which evidence decided, strongest first: torch_npu-only actions and
// settings keys; frames inside torch_npu or inside torch's CUDA code; the
// torch 2.0 layout; time_us and allocator_settings (torch_npu writes
// neither); stream 0 (CUDA's default stream; torch_npu's streams are
// aclrtStream handles); and last, weakly, non-zero streams alone.
func (b *builder) schema(stacks []snapshot.Stack) (string, string) {
	npu, cuda := frameEvidence(stacks)
	switch {
	case b.sawWorkspace:
		return SchemaTorchNPU, "workspace_snapshot entries (torch_npu's workspace triples)"
	case b.sawNPUConf:
		return SchemaTorchNPU, "allocator_settings names PYTORCH_NPU_ALLOC_CONF"
	case npu > cuda:
		return SchemaTorchNPU, fmt.Sprintf("%d frames inside torch_npu (%d inside torch's CUDA code)", npu, cuda)
	case b.sawHistory || b.sawNoAddr:
		return SchemaTorch20, "blocks carry history / no address (the torch 2.0 layout)"
	case b.sawCUDAConf:
		return SchemaTorch21, "allocator_settings names PYTORCH_CUDA_ALLOC_CONF"
	case cuda > npu:
		return SchemaTorch21, fmt.Sprintf("%d frames inside torch's CUDA code (%d inside torch_npu)", cuda, npu)
	case b.sawTime:
		return SchemaTorch21, "trace entries carry time_us (torch_npu records none)"
	case b.sawSettings:
		return SchemaTorch21, "allocator_settings present (torch_npu writes none)"
	case b.sawStreamZero:
		return SchemaTorch21, "stream 0 is CUDA's default stream (torch_npu's streams are aclrtStream handles)"
	case b.sawStream:
		return SchemaTorchNPU, "only non-zero stream handles, and nothing else decides (weak evidence)"
	}
	return SchemaTorch21, "nothing decides: PyTorch's CUDA layout assumed"
}

// frameEvidence counts the distinct frames that lie inside torch_npu and
// inside torch's CUDA code (Python files or C++ symbols).
func frameEvidence(stacks []snapshot.Stack) (npu, cuda int) {
	seen := make(map[snapshot.Frame]struct{})
	for _, st := range stacks {
		for _, f := range st {
			if _, ok := seen[f]; ok {
				continue
			}
			seen[f] = struct{}{}
			switch {
			case isNPUFrame(f):
				npu++
			case isCUDAFrame(f):
				cuda++
			}
		}
	}
	return npu, cuda
}

func isNPUFrame(f snapshot.Frame) bool {
	for _, m := range []string{"torch_npu", "c10_npu", "NPUCachingAllocator", "at_npu::", "aclrt"} {
		if strings.Contains(f.Filename, m) || strings.Contains(f.Name, m) {
			return true
		}
	}
	return false
}

func isCUDAFrame(f snapshot.Frame) bool {
	name := strings.ReplaceAll(f.Filename, "\\", "/")
	for _, m := range []string{"torch/cuda/", "c10/cuda/", "libc10_cuda", "libtorch_cuda", "CUDACachingAllocator", "c10::cuda::", "cudaMalloc"} {
		if strings.Contains(name, m) || strings.Contains(f.Name, m) {
			return true
		}
	}
	return false
}

// settings converts the allocator_settings plain dict.
func (b *builder) settings(d *dict) (*snapshot.Settings, error) {
	b.sawSettings = true
	st := &snapshot.Settings{}
	for _, p := range d.pend {
		if p.k.k != kStr {
			continue
		}
		key, v := p.k.s, p.v
		bad := func(want string) error { return fmt.Errorf("key %q: want %s, got %s", key, want, v.k) }
		switch {
		case strings.HasSuffix(key, "_ALLOC_CONF"):
			if v.k != kStr {
				return nil, bad("str")
			}
			st.ConfKey, st.Conf = key, v.s
			if strings.Contains(key, "NPU") {
				b.sawNPUConf = true
			} else if strings.Contains(key, "CUDA") || strings.Contains(key, "HIP") {
				b.sawCUDAConf = true
			}
		case key == "max_split_size":
			x, ok := v.int64()
			if !ok {
				return nil, bad("int")
			}
			st.MaxSplitSize = x
		case key == "garbage_collection_threshold":
			switch v.k {
			case kFloat:
				st.GarbageCollectionThreshold = math.Float64frombits(v.n)
			case kInt:
				st.GarbageCollectionThreshold = float64(int64(v.n))
			default:
				return nil, bad("float")
			}
		case key == "pinned_num_register_threads":
			x, ok := v.int64()
			if !ok {
				return nil, bad("int")
			}
			st.PinnedNumRegisterThreads = x
		case key == "expandable_segments", strings.HasPrefix(key, "release_lock_on_"),
			strings.HasPrefix(key, "pinned_use_") && strings.HasSuffix(key, "_host_register"),
			key == "graph_capture_record_stream_reuse":
			if v.k != kBool && v.k != kInt {
				return nil, bad("bool")
			}
			on := v.n != 0
			switch {
			case key == "expandable_segments":
				st.ExpandableSegments = on
			case strings.HasPrefix(key, "release_lock_on_"):
				st.ReleaseLockOnMalloc = on
			case key == "graph_capture_record_stream_reuse":
				st.GraphCaptureRecordStreamReuse = on
			default:
				st.PinnedUseHostRegister = on
			}
		case key == "roundup_power2_divisions":
			if v.k != kDict || v.d.kind != dUnknown {
				return nil, bad("dict")
			}
			st.RoundupPower2Divisions = make(map[int64]int64, len(v.d.pend))
			for _, q := range v.d.pend {
				var k int64
				var err error
				switch q.k.k {
				case kStr:
					k, err = strconv.ParseInt(q.k.s, 10, 64)
				case kInt:
					k = int64(q.k.n)
				default:
					err = fmt.Errorf("key is a %s", q.k.k)
				}
				x, ok := q.v.int64()
				if err != nil || !ok {
					return nil, fmt.Errorf("roundup_power2_divisions: want {\"<MiB>\": int}, got a %s key / %s value", q.k.k, q.v.k)
				}
				st.RoundupPower2Divisions[k] = x
			}
		}
	}
	return st, nil
}
