package replay

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/npumon/npumon/allocator/snapshot"
)

// Export writes a snapshot back out in the layouts torch reads: the torch
// 2.x dict schema (segments, device_traces, allocator_settings,
// external_annotations) or the torch 1.13 bare list of segments.

// ExportSchema selects the layout Write* produce.
type ExportSchema int

const (
	ExportDict    ExportSchema = iota // torch 2.x dict, with time_us when known
	ExportList113                     // torch 1.13: bare list of segments, blocks with history
)

// WritePickle writes s as a protocol-4 pickle that Python's pickle module
// and PyTorch's memory viewer load.
func WritePickle(w io.Writer, s *snapshot.Snapshot, schema ExportSchema) error {
	p := &pickleEmitter{w: bufio.NewWriterSize(w, 1<<20), strs: map[string]uint32{}, stacks: map[snapshot.StackID]uint32{}, snap: s}
	p.w.Write([]byte{opProto, 4})
	writeSnapshot(p, s, schema)
	p.w.WriteByte(opStop)
	return p.w.Flush()
}

// WriteJSON writes s as JSON of the same shape (pool ids become 2-arrays),
// every stack written out in full at each block and entry that names it:
// the form other tools that read torch's snapshot layout expect.
// WriteCompactJSON writes each stack once.
func WriteJSON(w io.Writer, s *snapshot.Snapshot, schema ExportSchema) error {
	j := &jsonEmitter{w: bufio.NewWriterSize(w, 1<<20), snap: s, first: []bool{true}}
	writeSnapshot(j, s, schema)
	j.w.WriteByte('\n')
	return j.w.Flush()
}

// emitter is the output side shared by the pickle and JSON writers.
type emitter interface {
	beginDict()
	key(k string)
	endDict()
	beginList()
	endList()
	int(v int64)
	uint(v uint64)
	str(s string)
	boolean(b bool)
	float(f float64)
	pair(p snapshot.PoolID)
	frames(id snapshot.StackID) // the "frames" key and its stack
	top()                       // after the top-level dict opens
}

func writeSnapshot(e emitter, s *snapshot.Snapshot, schema ExportSchema) {
	if schema == ExportList113 {
		e.beginList()
		for i := range s.Segments {
			writeSegment113(e, &s.Segments[i])
		}
		e.endList()
		return
	}
	e.beginDict()
	e.top()
	e.key("segments")
	e.beginList()
	for i := range s.Segments {
		writeSegment(e, &s.Segments[i])
	}
	e.endList()
	e.key("device_traces")
	e.beginList()
	for dev, tr := range s.DeviceTraces {
		e.beginList()
		for i := range tr {
			writeEntry(e, &tr[i], s, s.ForwardStack(dev, i))
		}
		e.endList()
	}
	e.endList()
	if s.Settings != nil {
		e.key("allocator_settings")
		writeSettings(e, s.Settings)
	}
	if s.ExternalAnnotations != nil {
		e.key("external_annotations")
		e.beginList()
		for _, a := range s.ExternalAnnotations {
			e.beginDict()
			e.key("name")
			e.str(a.Name)
			e.key("stage")
			e.str(a.Stage)
			e.key("device")
			e.int(int64(a.Device))
			e.key("time_us")
			e.int(a.TimeUS)
			e.endDict()
		}
		e.endList()
	}
	e.endDict()
}

// writeSegmentHead opens a segment's dict and writes the keys both torch
// shapes share, device to segment_type; requested_size (which 1.13 does not
// have) stands after active_size when withRequested.
func writeSegmentHead(e emitter, s *snapshot.Segment, withRequested bool) {
	e.beginDict()
	e.key("device")
	e.int(int64(s.Device))
	e.key("address")
	e.uint(s.Address)
	e.key("total_size")
	e.int(s.TotalSize)
	e.key("allocated_size")
	e.int(s.AllocatedSize)
	e.key("active_size")
	e.int(s.ActiveSize)
	if withRequested {
		e.key("requested_size")
		e.int(s.RequestedSize)
	}
	e.key("stream")
	e.uint(s.Stream)
	e.key("segment_type")
	e.str(s.SegmentType())
}

func writeSegment(e emitter, s *snapshot.Segment) {
	writeSegmentHead(e, s, true)
	if s.HasPoolID {
		e.key("segment_pool_id")
		e.pair(s.PoolID)
	}
	e.key("is_expandable")
	e.boolean(s.IsExpandable)
	e.frames(s.Frames)
	e.key("blocks")
	e.beginList()
	for i := range s.Blocks {
		b := &s.Blocks[i]
		e.beginDict()
		e.key("address")
		e.uint(b.Address)
		e.key("size")
		e.int(b.Size)
		e.key("requested_size")
		e.int(b.RequestedSize)
		e.key("state")
		e.str(b.State.String())
		e.frames(b.Frames)
		if len(b.History) > 0 {
			e.key("history")
			writeHistory(e, b.History)
		}
		e.endDict()
	}
	e.endList()
	e.endDict()
}

// writeFrames writes a stack's frame dicts, the items of its list.
func writeFrames(e emitter, fs []snapshot.Frame) {
	for _, f := range fs {
		e.beginDict()
		e.key("filename")
		e.str(f.Filename)
		e.key("line")
		e.int(f.Line)
		e.key("name")
		e.str(f.Name)
		e.endDict()
	}
}

func writeHistory(e emitter, hs []snapshot.BlockHistory) {
	e.beginList()
	for _, h := range hs {
		e.beginDict()
		e.key("addr")
		e.uint(h.Addr)
		e.key("real_size")
		e.int(h.RealSize)
		e.frames(h.Frames)
		e.endDict()
	}
	e.endList()
}

// writeSegment113 writes the keys torch 1.13's _memory_viz reads: blocks
// carry size, state and a history whose first record is the live
// allocation (real_size = requested bytes).
func writeSegment113(e emitter, s *snapshot.Segment) {
	writeSegmentHead(e, s, false)
	e.key("blocks")
	e.beginList()
	for i := range s.Blocks {
		b := &s.Blocks[i]
		e.beginDict()
		e.key("size")
		e.int(b.Size)
		e.key("state")
		e.str(b.State.String())
		switch {
		case len(b.History) > 0:
			e.key("history")
			writeHistory(e, b.History)
		case b.State.Active():
			e.key("history")
			writeHistory(e, []snapshot.BlockHistory{{Addr: b.Address, RealSize: b.RequestedSize, Frames: b.Frames}})
		}
		e.endDict()
	}
	e.endList()
	e.endDict()
}

func writeEntry(e emitter, t *snapshot.TraceEntry, s *snapshot.Snapshot, fwd snapshot.Stack) {
	e.beginDict()
	e.key("action")
	e.str(s.ActionName(t.Action))
	if t.Action == snapshot.ActionOOM {
		e.key("device_free")
		e.int(t.DeviceFree)
	} else {
		e.key("addr")
		e.uint(t.Addr)
	}
	e.key("size")
	e.int(t.Size)
	e.key("stream")
	e.uint(t.Stream)
	if t.TimeUS != 0 {
		e.key("time_us")
		e.int(t.TimeUS)
	}
	if t.CompileContext != snapshot.NoText {
		e.key("compile_context")
		e.str(s.Text(t.CompileContext))
	}
	if t.UserMetadata != snapshot.NoText {
		e.key("user_metadata")
		e.str(s.Text(t.UserMetadata))
	}
	if t.HasPoolID {
		e.key("pool_id")
		e.pair(t.PoolID)
	}
	e.frames(t.Frames)
	if len(fwd) > 0 {
		e.key("forward_frames")
		e.beginList()
		for _, l := range forwardStrings(fwd) {
			e.str(l)
		}
		e.endList()
	}
	e.endDict()
}

func writeSettings(e emitter, st *snapshot.Settings) {
	e.beginDict()
	conf := st.ConfKey
	if conf == "" {
		conf = "PYTORCH_CUDA_ALLOC_CONF"
	}
	e.key(conf)
	e.str(st.Conf)
	e.key("max_split_size")
	e.int(st.MaxSplitSize)
	e.key("garbage_collection_threshold")
	e.float(st.GarbageCollectionThreshold)
	e.key("expandable_segments")
	e.boolean(st.ExpandableSegments)
	e.key("pinned_num_register_threads")
	e.int(st.PinnedNumRegisterThreads)
	e.key("release_lock_on_cudamalloc")
	e.boolean(st.ReleaseLockOnMalloc)
	e.key("pinned_use_cuda_host_register")
	e.boolean(st.PinnedUseHostRegister)
	e.key("graph_capture_record_stream_reuse")
	e.boolean(st.GraphCaptureRecordStreamReuse)
	if st.RoundupPower2Divisions != nil {
		e.key("roundup_power2_divisions")
		keys := make([]int64, 0, len(st.RoundupPower2Divisions))
		for k := range st.RoundupPower2Divisions {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
		e.beginDict()
		for _, k := range keys {
			e.key(strconv.FormatInt(k, 10))
			e.int(st.RoundupPower2Divisions[k])
		}
		e.endDict()
	}
	e.endDict()
}

// pickleEmitter writes protocol-4 opcodes. Strings and frame lists are
// memoized, so shared stacks are written once as the producer does.
type pickleEmitter struct {
	w      *bufio.Writer
	snap   *snapshot.Snapshot
	memo   uint32
	strs   map[string]uint32
	stacks map[snapshot.StackID]uint32
	lists  []int // items written in each open list's current batch, -1 for dicts
	num    [9]byte
}

// batch is the APPENDS batch size Python's pickler uses.
const batch = 1000

func (p *pickleEmitter) item() {
	if n := len(p.lists); n > 0 && p.lists[n-1] >= 0 {
		if p.lists[n-1] == batch {
			p.w.WriteByte(opAppends)
			p.w.WriteByte(opMark)
			p.lists[n-1] = 0
		}
		p.lists[n-1]++
	}
}

func (p *pickleEmitter) memoize() {
	p.w.WriteByte(opMemoize)
	p.memo++
}

func (p *pickleEmitter) get(i uint32) {
	if i < 256 {
		p.w.Write([]byte{opBinGet, byte(i)})
		return
	}
	p.num[0] = opLongBinGet
	binary.LittleEndian.PutUint32(p.num[1:5], i)
	p.w.Write(p.num[:5])
}

func (p *pickleEmitter) beginDict() {
	p.item()
	p.w.Write([]byte{opEmptyDict, opMark})
	p.lists = append(p.lists, -1)
}
func (p *pickleEmitter) key(k string) { p.rawStr(k) }
func (p *pickleEmitter) endDict() {
	p.w.WriteByte(opSetItems)
	p.lists = p.lists[:len(p.lists)-1]
}
func (p *pickleEmitter) beginList() {
	p.item()
	p.w.Write([]byte{opEmptyList, opMark})
	p.lists = append(p.lists, 0)
}
func (p *pickleEmitter) endList() {
	p.w.WriteByte(opAppends)
	p.lists = p.lists[:len(p.lists)-1]
}

func (p *pickleEmitter) int(v int64) {
	p.item()
	p.rawInt(v)
}

func (p *pickleEmitter) rawInt(v int64) {
	switch {
	case v >= 0 && v < 256:
		p.w.Write([]byte{opBinInt1, byte(v)})
	case v >= 0 && v < 65536:
		p.w.Write([]byte{opBinInt2, byte(v), byte(v >> 8)})
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.num[0] = opBinInt
		binary.LittleEndian.PutUint32(p.num[1:5], uint32(int32(v)))
		p.w.Write(p.num[:5])
	default:
		// Minimal two's complement, as Python's encode_long.
		var b [9]byte
		binary.LittleEndian.PutUint64(b[:8], uint64(v))
		if v < 0 {
			b[8] = 0xff
		}
		n := 9
		for n > 1 && (b[n-1] == 0 && b[n-2]&0x80 == 0 || b[n-1] == 0xff && b[n-2]&0x80 != 0) {
			n--
		}
		p.w.Write([]byte{opLong1, byte(n)})
		p.w.Write(b[:n])
	}
}

// uint writes an address or stream handle. A value above 2^63−1 is written
// as the int64 with the same 64 bits (an 8-byte LONG1, negative to Python):
// that is how torch's own dumps carry such values (its C++ side casts
// addresses and stream handles to int64_t), PyTorch's memory viewer reads
// LONG1 of at most 8 bytes only, and npumon's decoder reads a negative
// address or stream back as the same uint64. No value is ever written as a
// 9-byte long.
func (p *pickleEmitter) uint(v uint64) {
	p.int(int64(v))
}

func (p *pickleEmitter) str(s string) {
	p.item()
	p.rawStr(s)
}

func (p *pickleEmitter) rawStr(s string) {
	if i, ok := p.strs[s]; ok {
		p.get(i)
		return
	}
	if len(s) < 256 {
		p.w.Write([]byte{opShortBinUni, byte(len(s))})
	} else {
		p.num[0] = opBinUnicode
		binary.LittleEndian.PutUint32(p.num[1:5], uint32(len(s)))
		p.w.Write(p.num[:5])
	}
	p.w.WriteString(s)
	p.strs[s] = p.memo
	p.memoize()
}

func (p *pickleEmitter) boolean(b bool) {
	p.item()
	if b {
		p.w.WriteByte(opNewTrue)
	} else {
		p.w.WriteByte(opNewFalse)
	}
}

func (p *pickleEmitter) float(f float64) {
	p.item()
	p.num[0] = opBinFloat
	binary.BigEndian.PutUint64(p.num[1:9], math.Float64bits(f))
	p.w.Write(p.num[:9])
}

func (p *pickleEmitter) pair(v snapshot.PoolID) {
	p.item()
	p.rawInt(v[0])
	p.rawInt(v[1])
	p.w.WriteByte(opTuple2)
}

func (p *pickleEmitter) top() {}

func (p *pickleEmitter) frames(id snapshot.StackID) {
	p.key("frames")
	p.stack(id)
}

func (p *pickleEmitter) stack(id snapshot.StackID) {
	if i, ok := p.stacks[id]; ok && id != snapshot.NoStack {
		p.item()
		p.get(i)
		return
	}
	// Memoized right after EMPTY_LIST, before its MARK, as the pickler does.
	p.item()
	p.w.WriteByte(opEmptyList)
	p.stacks[id] = p.memo
	p.memoize()
	p.w.WriteByte(opMark)
	p.lists = append(p.lists, 0)
	writeFrames(p, p.snap.Stack(id))
	p.endList()
}

// jsonEmitter writes compact JSON.
type jsonEmitter struct {
	w     *bufio.Writer
	snap  *snapshot.Snapshot
	first []bool // per open container: no item written yet
	isKey bool   // the next value follows a key
	buf   []byte

	// dry run (JSONSize): cw counts the bytes; each stack is rendered once
	// and later references only add its size.
	cw    *countWriter
	sizes map[snapshot.StackID]int64

	// compact form (WriteCompactJSON): each stack's index in stack_table,
	// nil for the inline form.
	index map[snapshot.StackID]int
	table compactTables
}

// JSONSize is the exact size in bytes of WriteJSON's output for s, found
// without writing it: each distinct stack's frames are rendered once. JSON
// has no references, so a stack shared by many blocks and entries (a pickle
// memoizes it) is written out at each one; a small pickle can expand to a
// JSON many times its size, which callers check here first.
func JSONSize(s *snapshot.Snapshot, schema ExportSchema) int64 {
	cw := &countWriter{}
	j := &jsonEmitter{w: bufio.NewWriterSize(cw, 1<<16), snap: s, first: []bool{true}, cw: cw, sizes: map[snapshot.StackID]int64{}}
	writeSnapshot(j, s, schema)
	j.w.WriteByte('\n')
	j.w.Flush()
	return cw.n
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

func (j *jsonEmitter) pos() int64 { return j.cw.n + int64(j.w.Buffered()) }

func (j *jsonEmitter) sep() {
	if j.isKey {
		j.isKey = false
		return
	}
	n := len(j.first) - 1
	if !j.first[n] {
		j.w.WriteByte(',')
	}
	j.first[n] = false
}

func (j *jsonEmitter) beginDict() { j.sep(); j.w.WriteByte('{'); j.first = append(j.first, true) }
func (j *jsonEmitter) endDict()   { j.w.WriteByte('}'); j.first = j.first[:len(j.first)-1] }
func (j *jsonEmitter) beginList() { j.sep(); j.w.WriteByte('['); j.first = append(j.first, true) }
func (j *jsonEmitter) endList()   { j.w.WriteByte(']'); j.first = j.first[:len(j.first)-1] }
func (j *jsonEmitter) key(k string) {
	j.sep()
	j.quote(k)
	j.w.WriteByte(':')
	j.isKey = true
}
func (j *jsonEmitter) int(v int64) {
	j.sep()
	j.buf = strconv.AppendInt(j.buf[:0], v, 10)
	j.w.Write(j.buf)
}
func (j *jsonEmitter) uint(v uint64) {
	j.sep()
	j.buf = strconv.AppendUint(j.buf[:0], v, 10)
	j.w.Write(j.buf)
}
func (j *jsonEmitter) str(s string) { j.sep(); j.quote(s) }
func (j *jsonEmitter) quote(s string) {
	b, _ := json.Marshal(s)
	j.w.Write(b)
}
func (j *jsonEmitter) boolean(b bool) {
	j.sep()
	if b {
		j.w.WriteString("true")
	} else {
		j.w.WriteString("false")
	}
}
func (j *jsonEmitter) float(f float64) {
	j.sep()
	if math.IsNaN(f) || math.IsInf(f, 0) {
		j.w.WriteString("null")
		return
	}
	j.buf = strconv.AppendFloat(j.buf[:0], f, 'g', -1, 64)
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		j.buf = append(j.buf, ".0"...)
	}
	j.w.Write(j.buf)
}
func (j *jsonEmitter) pair(p snapshot.PoolID) {
	j.beginList()
	j.int(p[0])
	j.int(p[1])
	j.endList()
}
func (j *jsonEmitter) frames(id snapshot.StackID) {
	if j.index != nil {
		j.key("stack")
		j.int(int64(j.index[id]))
		return
	}
	j.key("frames")
	j.stack(id)
}

func (j *jsonEmitter) stack(id snapshot.StackID) {
	if j.sizes != nil {
		if n, ok := j.sizes[id]; ok {
			j.sep()
			j.cw.n += n
			return
		}
		j.sep()
		start := j.pos()
		j.w.WriteByte('[')
		j.first = append(j.first, true)
		writeFrames(j, j.snap.Stack(id))
		j.endList()
		j.sizes[id] = j.pos() - start
		return
	}
	j.beginList()
	writeFrames(j, j.snap.Stack(id))
	j.endList()
}

// ParseExportSchema maps the --schema flag ("" or "2", "1.13").
func ParseExportSchema(s string) (ExportSchema, error) {
	switch s {
	case "", "2", "2.x", "dict":
		return ExportDict, nil
	case "1.13", "list":
		return ExportList113, nil
	}
	return 0, fmt.Errorf("unknown schema %q (want 1.13, or nothing for the torch 2.x dict)", s)
}
