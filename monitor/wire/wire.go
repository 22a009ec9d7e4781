package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/npumon/npumon/allocator/snapshot"
	"github.com/npumon/npumon/monitor/store"
)

// The live wire protocol (docs/protocol.md): a byte stream of frames
//
//	u32 LE length | u8 type | payload (length-1 bytes)
//
// Integers inside payloads are LEB128 varints (signed ones zigzag), strings
// are a uvarint length plus UTF-8 bytes. The producer speaks first: HELLO,
// then STACKS/SNAPSHOT, then ENTRIES, OPS, HEARTBEAT, GAP and STACKS frames
// in any order, BYE last.

// ProtocolVersion is the wire version this package speaks.
const ProtocolVersion = 1

// protocolMagic opens every HELLO payload.
const protocolMagic = "NPUMON"

// MaxFrame caps a frame's length; a larger length prefix is a decode error.
const MaxFrame = 16 << 20

// Frame types.
const (
	frameHello     = 1
	frameStacks    = 2
	frameSnapshot  = 3
	frameEntries   = 4
	frameOps       = 5
	frameHeartbeat = 6
	frameGap       = 7
	frameBye       = 8
)

// pollClockPrefix opens the clock string of a TimePollUS producer; the
// resolution follows as a duration ("poll:100ms").
const pollClockPrefix = "poll:"

// actionUnknown marks an action sent by name.
const actionUnknown = 0xFF

// wireActions are the action codes 0..12 (torch's strings, docs/protocol.md).
var wireActions = [...]snapshot.Action{
	snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionFree,
	snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap,
	snapshot.ActionSnapshot, snapshot.ActionOOM, snapshot.ActionUserDefined, snapshot.ActionAnnotate,
	snapshot.ActionWorkspaceSnapshot,
}

// Hello is the producer's handshake.
type Hello struct {
	Version     int
	PID         int
	Host        string
	StartUS     int64 // producer start, epoch µs
	NowUS       int64 // producer wall clock when the HELLO was sent, epoch µs
	ClockSource string
	TimeBase    store.TimeBase
	// Resolution is how long before its time an entry may have happened
	// (TimePollUS only: the producer's poll interval). On the wire it is
	// the clock string "poll:<duration>", e.g. "poll:100ms".
	Resolution time.Duration
	Devices    []store.DeviceInfo
	Settings   *snapshot.Settings
	// Peaks are the producer's own peaks since it started, per device,
	// when it sends them (an optional trailing HELLO field): a client that
	// attaches late sees only what happens after it, these cover the rest.
	Peaks []DevicePeak
}

// DevicePeak is a producer's peak figures for one device since it started.
type DevicePeak struct {
	Device        int
	ActiveBytes   int64 // peak of the active series (requested bytes of live allocations)
	ReservedBytes int64 // peak reserved bytes
}

// ---- encoding ----

type enc struct {
	b       []byte
	actions *snapshot.ActionTable // names the entries' unknown actions
	texts   *snapshot.TextTable   // holds the entries' strings
}

func (e *enc) u8(v uint8)     { e.b = append(e.b, v) }
func (e *enc) uv(v uint64)    { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) iv(v int64)     { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) str(s string)   { e.uv(uint64(len(s))); e.b = append(e.b, s...) }
func (e *enc) f64(v float64)  { e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(v)) }
func (e *enc) bool(v bool)    { e.u8(b2u(v)) }
func (e *enc) begin(typ byte) { e.b = append(e.b, 0, 0, 0, 0, typ) }

// frame starts a frame and returns its offset for end.
func (e *enc) frame(typ byte) int { off := len(e.b); e.begin(typ); return off }

func (e *enc) end(off int) {
	binary.LittleEndian.PutUint32(e.b[off:], uint32(len(e.b)-off-4))
}

func b2u(v bool) uint8 {
	if v {
		return 1
	}
	return 0
}

func encodeHello(e *enc, h *Hello) {
	off := e.frame(frameHello)
	e.b = append(e.b, protocolMagic...)
	e.b = binary.LittleEndian.AppendUint16(e.b, uint16(h.Version))
	e.uv(uint64(h.PID))
	e.str(h.Host)
	e.iv(h.StartUS)
	e.iv(h.NowUS)
	clock := h.ClockSource
	if h.TimeBase == store.TimePollUS && clock == "" {
		clock = pollClockPrefix + h.Resolution.String()
	}
	e.str(clock)
	e.u8(uint8(h.TimeBase))
	e.uv(uint64(len(h.Devices)))
	for _, d := range h.Devices {
		e.iv(int64(d.ID))
		e.str(d.Name)
		e.iv(d.HBMTotal)
		e.iv(d.HBMUsed)
		e.uv(uint64(d.Streams))
	}
	if s := h.Settings; s != nil {
		e.u8(1)
		e.str(s.ConfKey)
		e.str(s.Conf)
		e.iv(s.MaxSplitSize)
		e.f64(s.GarbageCollectionThreshold)
		e.u8(b2u(s.ExpandableSegments) | b2u(s.ReleaseLockOnMalloc)<<1 | b2u(s.PinnedUseHostRegister)<<2 | b2u(s.GraphCaptureRecordStreamReuse)<<3)
		e.iv(s.PinnedNumRegisterThreads)
		e.uv(uint64(len(s.RoundupPower2Divisions)))
		for k, v := range s.RoundupPower2Divisions {
			e.iv(k)
			e.iv(v)
		}
	} else {
		e.u8(0)
	}
	if len(h.Peaks) > 0 { // optional: absent when the producer has none
		e.uv(uint64(len(h.Peaks)))
		for _, p := range h.Peaks {
			e.iv(int64(p.Device))
			e.iv(p.ActiveBytes)
			e.iv(p.ReservedBytes)
		}
	}
	e.end(off)
}

// stacksPerFrame keeps STACKS frames far below MaxFrame and the clients'
// per-frame limits: encodeStacks writes one frame per this many stacks.
const stacksPerFrame = 512

func encodeStacks(e *enc, ids []snapshot.StackID, stacks []snapshot.Stack) {
	for len(ids) > stacksPerFrame {
		encodeStacksFrame(e, ids[:stacksPerFrame], stacks[:stacksPerFrame])
		ids, stacks = ids[stacksPerFrame:], stacks[stacksPerFrame:]
	}
	encodeStacksFrame(e, ids, stacks)
}

func encodeStacksFrame(e *enc, ids []snapshot.StackID, stacks []snapshot.Stack) {
	off := e.frame(frameStacks)
	e.uv(uint64(len(ids)))
	for i, id := range ids {
		e.uv(uint64(id))
		e.uv(uint64(len(stacks[i])))
		for _, f := range stacks[i] {
			e.str(f.Filename)
			e.iv(f.Line)
			e.str(f.Name)
		}
	}
	e.end(off)
}

// encodeSnapshot writes segments and, per device, the sequence number of
// the first entry the snapshot does not reflect.
func encodeSnapshot(e *enc, segs []snapshot.Segment, resume map[int]uint64) {
	off := e.frame(frameSnapshot)
	e.uv(uint64(len(segs)))
	for i := range segs {
		s := &segs[i]
		e.iv(int64(s.Device))
		e.uv(s.Address)
		e.iv(s.TotalSize)
		e.uv(s.Stream)
		e.u8(b2u(s.IsLarge) | b2u(s.IsExpandable)<<1 | b2u(s.HasPoolID)<<2)
		if s.HasPoolID {
			e.iv(s.PoolID[0])
			e.iv(s.PoolID[1])
		}
		e.uv(uint64(s.Frames))
		e.uv(uint64(len(s.Blocks)))
		for _, b := range s.Blocks {
			e.uv(b.Address)
			e.iv(b.Size)
			e.iv(b.RequestedSize)
			e.u8(uint8(b.State))
			e.uv(uint64(b.Frames))
		}
	}
	e.uv(uint64(len(resume)))
	for d, seq := range resume {
		e.iv(int64(d))
		e.uv(seq)
	}
	e.end(off)
}

func encodeAction(e *enc, a snapshot.Action) {
	if a < snapshot.Action(len(wireActions)) && wireActions[a] == a {
		e.u8(uint8(a))
		return
	}
	e.u8(actionUnknown)
	e.str(e.actions.Name(a))
}

// encodeEntries writes one ENTRIES frame for entries first..first+len-1.
func encodeEntries(e *enc, device int, first uint64, entries []snapshot.TraceEntry) {
	encodeEntriesSized(e, device, first, entries, nil)
}

// encodeEntriesSized is encodeEntries with, per entry, the allocated
// block's rounded size (0: not known; nil: none known), sent as block_size.
func encodeEntriesSized(e *enc, device int, first uint64, entries []snapshot.TraceEntry, blockSizes []int64) {
	off := e.frame(frameEntries)
	e.iv(int64(device))
	e.uv(first)
	e.uv(uint64(len(entries)))
	encodeEntryBodies(e, entries, blockSizes, 0)
	e.end(off)
}

// encodeEntryBodies appends the encodings of entries, what an ENTRIES frame
// holds after its count; last is the time of the entry before them in the
// frame (0 for the first). It returns the time of the last one.
func encodeEntryBodies(e *enc, entries []snapshot.TraceEntry, blockSizes []int64, last int64) int64 {
	for i := range entries {
		t := &entries[i]
		encodeAction(e, t.Action)
		e.uv(t.Addr)
		e.iv(t.Size)
		e.uv(t.Stream)
		e.iv(t.TimeUS - last)
		last = t.TimeUS
		e.uv(uint64(t.Frames))
		var bs int64
		if i < len(blockSizes) {
			bs = blockSizes[i]
		}
		flags := b2u(t.HasPoolID) | b2u(t.CompileContext != snapshot.NoText)<<1 | b2u(t.UserMetadata != snapshot.NoText)<<2 | b2u(t.DeviceFree != 0)<<3 | b2u(bs > 0)<<4
		e.u8(flags)
		if t.HasPoolID {
			e.iv(t.PoolID[0])
			e.iv(t.PoolID[1])
		}
		if t.CompileContext != snapshot.NoText {
			e.str(e.texts.Text(t.CompileContext))
		}
		if t.UserMetadata != snapshot.NoText {
			e.str(e.texts.Text(t.UserMetadata))
		}
		if t.DeviceFree != 0 {
			e.iv(t.DeviceFree)
		}
		if bs > 0 {
			e.iv(bs)
		}
	}
	return last
}

// entryHead reads an encoded entry up to its time delta: the offsets where
// the delta starts and ends, and its value.
func entryHead(d *dec) (dtAt, dtEnd int, dt int64) {
	if d.u8("entry.action") == actionUnknown {
		d.str("entry.action_name")
	}
	d.uv("entry.addr")
	d.iv("entry.size")
	d.uv("entry.stream")
	dtAt = d.off
	dt = d.iv("entry.time_delta")
	return dtAt, d.off, dt
}

// entryTail reads the rest of an encoded entry after its time delta.
func entryTail(d *dec) {
	d.uv("entry.frames")
	f := d.u8("entry.flags")
	if f&1 != 0 {
		d.iv("entry.pool_id")
		d.iv("entry.pool_id")
	}
	if f&2 != 0 {
		d.str("entry.compile_context")
	}
	if f&4 != 0 {
		d.str("entry.user_metadata")
	}
	if f&8 != 0 {
		d.iv("entry.device_free")
	}
	if f&16 != 0 {
		d.iv("entry.block_size")
	}
}

// cutEntryBodies returns what encodeEntryBodies wrote for entries k… of
// body (which it wrote from the frame's start, last 0): the same bytes but
// for the first remaining entry's time delta, which becomes its time. nil
// when k takes them all; an error for a body it did not write.
func cutEntryBodies(body []byte, k int) ([]byte, error) {
	d := &dec{b: body}
	var last int64
	for range k {
		_, _, dt := entryHead(d)
		last += dt
		entryTail(d)
	}
	if d.err != nil {
		return nil, d.err
	}
	if d.off == len(body) {
		return nil, nil
	}
	start := d.off
	dtAt, dtEnd, dt := entryHead(d)
	if d.err != nil {
		return nil, d.err
	}
	out := make([]byte, 0, len(body)-start+binary.MaxVarintLen64)
	out = append(out, body[start:dtAt]...)
	out = binary.AppendVarint(out, last+dt)
	return append(out, body[dtEnd:]...), nil
}

func encodeOps(e *enc, ops []store.Op) {
	off := e.frame(frameOps)
	e.uv(uint64(len(ops)))
	for i := range ops {
		o := &ops[i]
		e.str(o.Name)
		e.iv(o.StartUS)
		e.iv(o.EndUS)
		e.uv(o.Thread)
		e.iv(o.Seq)
		e.iv(int64(o.Device))
		e.iv(o.MemDelta)
		e.iv(o.Step)
		e.bool(o.IsStep)
		e.str(o.InputDims)
	}
	e.end(off)
}

func encodeHeartbeat(e *enc, nowUS int64, devs []store.DeviceInfo) {
	off := e.frame(frameHeartbeat)
	e.iv(nowUS)
	e.uv(uint64(len(devs)))
	for _, d := range devs {
		e.iv(int64(d.ID))
		e.iv(d.HBMTotal)
		e.iv(d.HBMUsed)
	}
	e.end(off)
}

func encodeGap(e *enc, device int, missed, next uint64) {
	off := e.frame(frameGap)
	e.iv(int64(device))
	e.uv(missed)
	e.uv(next)
	e.end(off)
}

func encodeBye(e *enc, reason string) {
	off := e.frame(frameBye)
	e.str(reason)
	e.end(off)
}

// ---- decoding ----

// errShort is a payload that ends inside a field.
var errShort = errors.New("payload ends inside a field")

// dec reads one frame's payload; the first error sticks.
type dec struct {
	b       []byte
	off     int
	err     error
	actions *snapshot.ActionTable // registers the entries' unknown actions
	texts   *snapshot.TextTable   // interns the entries' strings
}

func (d *dec) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%s at payload offset %d: %w", field, d.off, err)
	}
}

func (d *dec) u8(field string) uint8 {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(field, errShort)
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) uv(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(field, errors.New("bad varint"))
		return 0
	}
	d.off += n
	return v
}

// iv reads a signed varint: a zig-zag encoded uvarint, as binary.Varint.
func (d *dec) iv(field string) int64 {
	u := d.uv(field)
	return int64(u>>1) ^ -int64(u&1)
}

func (d *dec) str(field string) string {
	n := d.uv(field)
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)-d.off) {
		d.fail(field, fmt.Errorf("string length %d beyond the frame", n))
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

func (d *dec) f64(field string) float64 {
	if d.err != nil {
		return 0
	}
	if len(d.b)-d.off < 8 {
		d.fail(field, errShort)
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b[d.off:]))
	d.off += 8
	return v
}

// count reads a element count and caps it by the bytes left (each element
// takes at least minSize bytes), so hostile counts cannot allocate.
func (d *dec) count(field string, minSize int) int {
	n := d.uv(field)
	if d.err != nil {
		return 0
	}
	if n > uint64((len(d.b)-d.off)/minSize) {
		d.fail(field, fmt.Errorf("count %d beyond the frame", n))
		return 0
	}
	return int(n)
}

// countMax is count with a cap of its own: per-frame limits that keep what
// one frame can make the decoder allocate small.
func (d *dec) countMax(field string, minSize, limit int) int {
	n := d.count(field, minSize)
	if n > limit {
		d.fail(field, fmt.Errorf("count %d over the limit of %d per frame", n, limit))
		return 0
	}
	return n
}

// Per-frame limits (a producer sends far less: ENTRIES of at most 32768
// entries, OPS of 8192 ops).
const (
	maxFrameEntries  = 1 << 16
	maxFrameOps      = 1 << 16
	maxFrameStacks   = 1 << 19 // a first STACKS frame may define every stack of a trace
	maxFrameFrames   = 1 << 21 // frames over all stacks of one STACKS frame
	maxFrameSegments = 1 << 18
	maxFrameBlocks   = 1 << 20 // blocks over all segments of one SNAPSHOT
	maxRoundupKeys   = 1 << 10 // roundup_power2_divisions entries in a HELLO
)

func (d *dec) done() error {
	if d.err == nil && d.off != len(d.b) {
		d.err = fmt.Errorf("%d trailing bytes in frame", len(d.b)-d.off)
	}
	return d.err
}

// frameReader reads frames from a stream, reusing one buffer.
type frameReader struct {
	r       io.Reader
	hdr     [5]byte
	buf     []byte
	alloc   func(n int) []byte // a buffer for a payload of n bytes that buf has no room for (nil: make)
	off     int64              // stream offset of the next frame
	partial int                // after an error: bytes of the unfinished frame received
}

// next returns the next frame's type and payload (valid until the next
// call). A read error other than the end of the stream (a timeout) is
// wrapped, not reported as a close.
func (fr *frameReader) next() (byte, []byte, error) {
	fr.partial = 0
	if m, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		fr.partial = m
		if err == io.ErrUnexpectedEOF {
			return 0, nil, fmt.Errorf("stream offset %d: connection closed inside a frame header", fr.off)
		}
		if m > 0 {
			return 0, nil, fmt.Errorf("stream offset %d: inside a frame header: %w", fr.off, err)
		}
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(fr.hdr[:4])
	if n < 1 || n > MaxFrame {
		return 0, nil, fmt.Errorf("stream offset %d: frame length %d out of range (1..%d)", fr.off, n, MaxFrame)
	}
	typ := fr.hdr[4]
	if cap(fr.buf) < int(n-1) {
		if fr.alloc != nil {
			fr.buf = fr.alloc(int(n - 1))
		} else {
			fr.buf = make([]byte, n-1)
		}
	}
	fr.buf = fr.buf[:n-1]
	if m, err := io.ReadFull(fr.r, fr.buf); err != nil {
		fr.partial = 5 + m
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return 0, nil, fmt.Errorf("stream offset %d: connection closed inside a frame (type %d, %d bytes): %w", fr.off, typ, n, io.ErrUnexpectedEOF)
		}
		return 0, nil, fmt.Errorf("stream offset %d: inside a frame (type %d, %d of %d bytes): %w", fr.off, typ, 5+m, 4+n, err)
	}
	fr.off += 4 + int64(n)
	return typ, fr.buf, nil
}

func decodeHello(p []byte) (*Hello, error) {
	if len(p) < len(protocolMagic)+2 || string(p[:len(protocolMagic)]) != protocolMagic {
		return nil, errors.New("not an npumon producer (bad HELLO magic)")
	}
	h := &Hello{Version: int(binary.LittleEndian.Uint16(p[len(protocolMagic):]))}
	if h.Version != ProtocolVersion {
		return nil, fmt.Errorf("producer speaks protocol version %d, this npumon speaks %d", h.Version, ProtocolVersion)
	}
	d := &dec{b: p, off: len(protocolMagic) + 2}
	h.PID = int(d.uv("pid"))
	h.Host = d.str("host")
	h.StartUS = d.iv("start_us")
	h.NowUS = d.iv("now_us")
	h.ClockSource = d.str("clock")
	h.TimeBase = store.TimeBase(d.u8("time_base"))
	if h.TimeBase == store.TimePollUS && d.err == nil {
		r, ok := strings.CutPrefix(h.ClockSource, pollClockPrefix)
		res, err := time.ParseDuration(r)
		if !ok || err != nil || res <= 0 {
			d.fail("clock", fmt.Errorf("time_base 2 (poll) needs clock \"%s<duration>\", got %q", pollClockPrefix, h.ClockSource))
		}
		h.Resolution = res
	}
	n := d.countMax("devices", 5, MaxDeviceID)
	for i := 0; i < n && d.err == nil; i++ {
		h.Devices = append(h.Devices, store.DeviceInfo{ID: int(d.iv("device.id")), Name: d.str("device.name"),
			HBMTotal: d.iv("device.hbm_total"), HBMUsed: d.iv("device.hbm_used"), Streams: int(d.uv("device.streams"))})
	}
	if d.u8("settings") == 1 {
		s := &snapshot.Settings{}
		s.ConfKey = d.str("settings.conf_key")
		s.Conf = d.str("settings.conf")
		s.MaxSplitSize = d.iv("settings.max_split_size")
		s.GarbageCollectionThreshold = d.f64("settings.gc_threshold")
		f := d.u8("settings.flags")
		s.ExpandableSegments, s.ReleaseLockOnMalloc = f&1 != 0, f&2 != 0
		s.PinnedUseHostRegister, s.GraphCaptureRecordStreamReuse = f&4 != 0, f&8 != 0
		s.PinnedNumRegisterThreads = d.iv("settings.pinned_threads")
		if m := d.countMax("settings.roundup", 2, maxRoundupKeys); m > 0 {
			s.RoundupPower2Divisions = make(map[int64]int64, m)
			for i := 0; i < m; i++ {
				k := d.iv("roundup.key")
				s.RoundupPower2Divisions[k] = d.iv("roundup.value")
			}
		}
		h.Settings = s
	}
	if d.err == nil && d.off < len(d.b) {
		n := d.count("peaks", 3)
		for i := 0; i < n && d.err == nil; i++ {
			h.Peaks = append(h.Peaks, DevicePeak{Device: int(d.iv("peak.device")), ActiveBytes: d.iv("peak.active"), ReservedBytes: d.iv("peak.reserved")})
		}
	}
	return h, d.done()
}

// wireStack is a producer stack id with its frames.
type wireStack struct {
	id     uint64
	frames snapshot.Stack
}

// decodeStacks decodes a STACKS frame; a stack may have at most maxDepth
// frames.
func decodeStacks(p []byte, maxDepth int) ([]wireStack, error) {
	d := &dec{b: p}
	n := d.countMax("stacks", 2, maxFrameStacks)
	out := make([]wireStack, 0, n)
	total := 0
	for i := 0; i < n && d.err == nil; i++ {
		ws := wireStack{id: d.uv("stack.id")}
		m := d.countMax("stack.frames", 3, maxDepth)
		if total += m; total > maxFrameFrames {
			d.fail("stack.frames", fmt.Errorf("more than %d frames in one STACKS frame", maxFrameFrames))
			break
		}
		ws.frames = make(snapshot.Stack, 0, m)
		for j := 0; j < m && d.err == nil; j++ {
			ws.frames = append(ws.frames, snapshot.Frame{Filename: d.str("frame.filename"), Line: d.iv("frame.line"), Name: d.str("frame.name")})
		}
		out = append(out, ws)
	}
	return out, d.done()
}

func decodeSnapshot(p []byte) ([]snapshot.Segment, map[int]uint64, error) {
	d := &dec{b: p}
	n := d.countMax("segments", 7, maxFrameSegments)
	segs := make([]snapshot.Segment, 0, n)
	blocks := 0
	for i := 0; i < n && d.err == nil; i++ {
		s := snapshot.Segment{Device: int(d.iv("segment.device")), Address: d.uv("segment.address"),
			TotalSize: d.iv("segment.total_size"), Stream: d.uv("segment.stream")}
		f := d.u8("segment.flags")
		s.IsLarge, s.IsExpandable, s.HasPoolID = f&1 != 0, f&2 != 0, f&4 != 0
		if s.HasPoolID {
			s.PoolID = snapshot.PoolID{d.iv("segment.pool_id"), d.iv("segment.pool_id")}
		}
		s.Frames = snapshot.StackID(d.uv("segment.frames"))
		m := d.count("segment.blocks", 5)
		if blocks += m; blocks > maxFrameBlocks {
			d.fail("segment.blocks", fmt.Errorf("more than %d blocks in one SNAPSHOT", maxFrameBlocks))
			break
		}
		s.Blocks = make([]snapshot.Block, 0, m)
		for j := 0; j < m && d.err == nil; j++ {
			b := snapshot.Block{Address: d.uv("block.address"), Size: d.iv("block.size"), RequestedSize: d.iv("block.requested_size")}
			st := d.u8("block.state")
			if st > uint8(snapshot.StateActivePendingFree) {
				d.fail("block.state", fmt.Errorf("unknown state %d", st))
			}
			b.State = snapshot.BlockState(st)
			b.Frames = snapshot.StackID(d.uv("block.frames"))
			if b.State.Active() {
				s.ActiveSize += b.Size
				s.RequestedSize += b.RequestedSize
				if b.State == snapshot.StateActiveAllocated {
					s.AllocatedSize += b.Size
				}
			}
			s.Blocks = append(s.Blocks, b)
		}
		segs = append(segs, s)
	}
	m := d.countMax("resume", 2, MaxDeviceID)
	resume := make(map[int]uint64, m)
	for i := 0; i < m && d.err == nil; i++ {
		dev := int(d.iv("resume.device"))
		resume[dev] = d.uv("resume.seq")
	}
	return segs, resume, d.done()
}

// decodeEntriesNamed decodes an ENTRIES frame, appending its entries to out
// and, per entry, its block_size (0 when the producer did not send one) to
// sizes; unknown actions are registered in actions (nil: they decode as
// ActionOther) and the entries' strings in texts (nil: they are dropped).
func decodeEntriesNamed(p []byte, out []snapshot.TraceEntry, sizes []int64, actions *snapshot.ActionTable, texts *snapshot.TextTable) (device int, first uint64, _ []snapshot.TraceEntry, _ []int64, _ error) {
	if dev, fst, o, sz, ok := decodeEntriesFast(p, out, sizes); ok {
		return dev, fst, o, sz, nil
	}
	// anything unusual (an error, an action by name, strings): the careful
	// decoder, which names the field and offset of an error
	return decodeEntriesCareful(p, out, sizes, actions, texts)
}

func decodeEntriesCareful(p []byte, out []snapshot.TraceEntry, sizes []int64, actions *snapshot.ActionTable, texts *snapshot.TextTable) (device int, first uint64, _ []snapshot.TraceEntry, _ []int64, _ error) {
	d := &dec{b: p, actions: actions, texts: texts}
	device = int(d.iv("device"))
	first = d.uv("first_seq")
	n := d.countMax("entries", 7, maxFrameEntries)
	var last int64
	for i := 0; i < n && d.err == nil; i++ {
		var t snapshot.TraceEntry
		code := d.u8("entry.action")
		switch {
		case code == actionUnknown:
			t.Action = d.actions.Parse(d.str("entry.action_name"))
		case int(code) < len(wireActions):
			t.Action = wireActions[code]
		default:
			d.fail("entry.action", fmt.Errorf("unknown action code %d", code))
		}
		t.Addr = d.uv("entry.addr")
		t.Size = d.iv("entry.size")
		t.Stream = d.uv("entry.stream")
		last += d.iv("entry.time_delta")
		t.TimeUS = last
		t.Frames = snapshot.StackID(d.uv("entry.frames"))
		f := d.u8("entry.flags")
		if f&1 != 0 {
			t.HasPoolID = true
			t.PoolID = snapshot.PoolID{d.iv("entry.pool_id"), d.iv("entry.pool_id")}
		}
		if f&2 != 0 {
			t.CompileContext = d.texts.Intern(d.str("entry.compile_context"))
		}
		if f&4 != 0 {
			t.UserMetadata = d.texts.Intern(d.str("entry.user_metadata"))
		}
		if f&8 != 0 {
			t.DeviceFree = d.iv("entry.device_free")
		}
		var bs int64
		if f&16 != 0 {
			if bs = d.iv("entry.block_size"); bs <= 0 && d.err == nil {
				d.fail("entry.block_size", fmt.Errorf("block size %d is not positive", bs))
			}
		}
		if f&^31 != 0 {
			d.fail("entry.flags", fmt.Errorf("unknown flag bits %#x", f&^31))
		}
		out = append(out, t)
		sizes = append(sizes, bs)
	}
	return device, first, out, sizes, d.done()
}

// uvAt reads the uvarint at b[off:]; off < 0 after it means a bad or
// short one.
func uvAt(b []byte, off int) (uint64, int) {
	if off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	v, n := binary.Uvarint(b[off:])
	if n <= 0 {
		return 0, -1
	}
	return v, off + n
}

func zigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// decodeEntriesFast is decodeEntriesSized for well-formed frames of known
// action codes and no strings, without per-field error bookkeeping; ok is
// false where it meets anything else (what it appended to out and sizes
// is then past their lengths, to be overwritten).
func decodeEntriesFast(p []byte, out []snapshot.TraceEntry, sizes []int64) (device int, first uint64, _ []snapshot.TraceEntry, _ []int64, ok bool) {
	var u, n uint64
	off := 0
	u, off = uvAt(p, off)
	if off < 0 {
		return
	}
	device = int(zigzag(u))
	if first, off = uvAt(p, off); off < 0 {
		return
	}
	if n, off = uvAt(p, off); off < 0 || n > uint64((len(p)-off)/7) || n > maxFrameEntries {
		return
	}
	var last int64
	for range n {
		if off >= len(p) {
			return
		}
		code := p[off]
		off++
		if int(code) >= len(wireActions) {
			return
		}
		var t snapshot.TraceEntry
		t.Action = wireActions[code]
		if t.Addr, off = uvAt(p, off); off < 0 {
			return
		}
		if u, off = uvAt(p, off); off < 0 {
			return
		}
		t.Size = zigzag(u)
		if t.Stream, off = uvAt(p, off); off < 0 {
			return
		}
		if u, off = uvAt(p, off); off < 0 {
			return
		}
		last += zigzag(u)
		t.TimeUS = last
		if u, off = uvAt(p, off); off < 0 {
			return
		}
		t.Frames = snapshot.StackID(u)
		if off >= len(p) {
			return
		}
		f := p[off]
		off++
		var bs int64
		if f != 0 {
			if f&^31 != 0 || f&(2|4) != 0 { // strings: the careful decoder
				return
			}
			if f&1 != 0 {
				t.HasPoolID = true
				if u, off = uvAt(p, off); off < 0 {
					return
				}
				t.PoolID[0] = zigzag(u)
				if u, off = uvAt(p, off); off < 0 {
					return
				}
				t.PoolID[1] = zigzag(u)
			}
			if f&8 != 0 {
				if u, off = uvAt(p, off); off < 0 {
					return
				}
				t.DeviceFree = zigzag(u)
			}
			if f&16 != 0 {
				if u, off = uvAt(p, off); off < 0 {
					return
				}
				if bs = zigzag(u); bs <= 0 {
					return
				}
			}
		}
		out = append(out, t)
		sizes = append(sizes, bs)
	}
	if off != len(p) {
		return
	}
	return device, first, out, sizes, true
}

func decodeOps(p []byte) ([]store.Op, error) {
	d := &dec{b: p}
	n := d.countMax("ops", 10, maxFrameOps)
	out := make([]store.Op, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		out = append(out, store.Op{Name: d.str("op.name"), StartUS: d.iv("op.start_us"), EndUS: d.iv("op.end_us"),
			Thread: d.uv("op.thread"), Seq: d.iv("op.seq"), Device: int(d.iv("op.device")), MemDelta: d.iv("op.mem_delta"),
			Step: d.iv("op.step"), IsStep: d.u8("op.is_step") != 0, InputDims: d.str("op.input_dims")})
	}
	return out, d.done()
}

func decodeHeartbeat(p []byte) (int64, []store.DeviceInfo, error) {
	d := &dec{b: p}
	now := d.iv("now_us")
	n := d.countMax("devices", 3, MaxDeviceID)
	devs := make([]store.DeviceInfo, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		devs = append(devs, store.DeviceInfo{ID: int(d.iv("device.id")), HBMTotal: d.iv("device.hbm_total"), HBMUsed: d.iv("device.hbm_used")})
	}
	return now, devs, d.done()
}

func decodeGap(p []byte) (device int, missed, next uint64, err error) {
	d := &dec{b: p}
	device = int(d.iv("device"))
	missed = d.uv("missed")
	next = d.uv("next_seq")
	return device, missed, next, d.done()
}

func decodeBye(p []byte) (string, error) {
	d := &dec{b: p}
	s := d.str("reason")
	return s, d.done()
}
