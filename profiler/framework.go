package profiler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/npumon/npumon/internal/safefile"
)

// FRAMEWORK files (docs/reference/profiler-format.md §2): little-endian,
// packed. TLV files frame each record as u16 type · u32 length · value; value =
// fixed block + TLV string fields.

// FileKind is a FRAMEWORK file type, recognised by its name prefix the way
// torch_npu's analyser does (it ignores the outer record type).
type FileKind uint8

const (
	KindUnknown FileKind = iota
	KindOpRange
	KindOpMark
	KindMemory
	KindPythonTracerFunc
	KindPythonTracerHash
	KindParamTensor
	KindGC
)

// File names torch_npu writes under FRAMEWORK/.
const (
	FileOpRange          = "torch.op_range"
	FileOpMark           = "torch.op_mark"
	FileMemory           = "torch.memory_usage"
	FilePythonTracerFunc = "torch.python_tracer_func"
	FilePythonTracerHash = "torch.python_tracer_hash"
	FileParamTensor      = "torch.param_tensor_info"
	FileGC               = "torch.gc_record"
)

var kindPrefixes = [...]struct {
	prefix string
	kind   FileKind
}{
	{FileOpRange, KindOpRange}, {FileOpMark, KindOpMark}, {FileMemory, KindMemory},
	{FilePythonTracerFunc, KindPythonTracerFunc}, {FilePythonTracerHash, KindPythonTracerHash},
	{FileParamTensor, KindParamTensor}, {FileGC, KindGC},
}

// KindOf returns the kind of a FRAMEWORK file from its base name.
func KindOf(name string) FileKind {
	for _, p := range kindPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.kind
		}
	}
	return KindUnknown
}

func (k FileKind) String() string {
	for _, p := range kindPrefixes {
		if p.kind == k {
			return p.prefix
		}
	}
	return "unknown"
}

// Outer envelope types (FwkDataType).
const (
	envOpRange   = 1
	envOpMark    = 2
	envMemory    = 3
	envPyHash    = 4
	envParam     = 5
	envHeaderLen = 6
)

// Constant block sizes of the value part, and fixed record sizes.
const (
	opRangeFixed   = 58
	opMarkFixed    = 40
	memoryFixed    = 77
	keyFixed       = 8 // python_tracer_hash, param_tensor_info
	pyFuncSize     = 33
	gcSize         = 24
	maxRecordBytes = 64 << 20 // cap on one envelope; larger is corruption
)

// MaxFrameworkFile bounds one FRAMEWORK file (2 GiB): its records are held
// in memory, and a profile of ten million operators writes well under
// this. A larger file (or a sparse one claiming to be) is refused before
// it is read.
const MaxFrameworkFile = 2 << 30

// frameworkTooLarge is the error for a FRAMEWORK file over MaxFrameworkFile.
func frameworkTooLarge(path string, size int64) error {
	return fmt.Errorf("%s: %d bytes, over the %d-byte limit for a FRAMEWORK file", path, size, int64(MaxFrameworkFile))
}

// op_range TLV field ids (OpRangeDataType).
const (
	fieldName             = 2
	fieldInputDtypes      = 3
	fieldInputShapes      = 4
	fieldInputTensors     = 5
	fieldInputTensorLists = 6
	fieldInputScalars     = 7
	fieldStack            = 8
	fieldModule           = 9
	fieldExtraArgs        = 10
)

// RecordScope values (at::RecordScope) used in OpRangeRecord.Scope.
const (
	ScopeFunction         = 0
	ScopeBackwardFunction = 1
	ScopeUserScope        = 7
)

// OpRangeRecord is one torch.op_range record
// (docs/reference/profiler-format.md §2.2). Times are raw clock.
type OpRangeRecord struct {
	StartNS, EndNS   int64 // raw clock at enter / exit
	Seq              int64 // sequence number, -1 if none
	PID              uint64
	StartTID, EndTID uint64
	FwdTID           uint64 // forward thread of a backward op; 0 for forward ops
	Scope            uint8
	Async            bool

	Name             string
	InputDtypes      string // ';'-joined
	InputShapes      string // per input dims ','-joined, inputs ';'-joined
	InputTensors     string
	InputTensorLists string
	InputScalars     string
	Stack            string // frames ';'-joined
	Module           string // module hierarchy ';'-joined
	ExtraArgs        string
}

// Op mark categories (docs/reference/profiler-format.md §2.3).
const (
	MarkEnqueueStart = 0
	MarkEnqueueEnd   = 1
	MarkDequeueStart = 2
	MarkDequeueEnd   = 3
)

// OpMarkRecord is one torch.op_mark record
// (docs/reference/profiler-format.md §2.3). Time is raw clock.
type OpMarkRecord struct {
	TimeNS        int64
	Category      uint64
	CorrelationID uint64
	TID, PID      uint64
	Name          string
}

// Memory record enums (docs/reference/profiler-format.md §2.4).
const (
	DeviceTypeCPU = 0
	DeviceTypeNPU = 20 // c10::DeviceType::PrivateUse1

	ComponentCaching   = 0 // PTA caching allocator
	ComponentWorkspace = 1

	MemoryMalloc    = 0
	MemoryFree      = 1
	MemoryBlockFree = 2
	MemoryInvalid   = 3

	AllocatorInner    = 0
	AllocatorExternal = 1
)

// MemoryUsageRecord is one torch.memory_usage record
// (docs/reference/profiler-format.md §2.4). AllocSize is positive for MALLOC
// and negative for FREE/BLOCK_FREE; totals are the allocator's aggregates after
// the event, in bytes. Time is raw clock.
type MemoryUsageRecord struct {
	Ptr            int64
	TimeNS         int64
	AllocSize      int64
	TotalAllocated int64
	TotalReserved  int64
	TotalActive    int64
	StreamPtr      int64
	DeviceType     int8
	DeviceIndex    int8
	Component      uint8
	DataType       uint8
	AllocatorType  uint8
	TID, PID       uint64
}

// PythonTracerFuncRecord is one torch.python_tracer_func record
// (docs/reference/profiler-format.md §2.5).
type PythonTracerFuncRecord struct {
	TimeNS   uint64
	TID, PID uint64
	Key      uint64
	Tag      uint8 // 0 py call, 1 py return, 2 C call, 3 C return
}

// PythonTracerHashRecord is one torch.python_tracer_hash entry
// (docs/reference/profiler-format.md §2.6).
type PythonTracerHashRecord struct {
	Key   uint64
	Value string
}

// ParamTensorRecord is one torch.param_tensor_info entry
// (docs/reference/profiler-format.md §2.7).
type ParamTensorRecord struct {
	Key            uint64
	ModuleParam    string
	OptimizerParam string
}

// GCRecord is one torch.gc_record record
// (docs/reference/profiler-format.md §2.8). Times are raw clock.
type GCRecord struct {
	PID            uint64
	StartNS, EndNS uint64
}

// Records collects decoded records of any FRAMEWORK file.
type Records struct {
	OpRanges    []OpRangeRecord
	OpMarks     []OpMarkRecord
	Memory      []MemoryUsageRecord
	PyFuncs     []PythonTracerFuncRecord
	PyHashes    []PythonTracerHashRecord
	Params      []ParamTensorRecord
	GC          []GCRecord
	SkippedRecs int // envelopes shorter than their constant block (skipped, as torch_npu does)
}

// Decoder decodes one FRAMEWORK file incrementally: Feed it the file's bytes
// in any chunking and it emits every complete record exactly once, keeping a
// partial trailing record until the rest arrives.
type Decoder struct {
	kind    FileKind
	off     int64  // file offset of pending[0]
	pending []byte // bytes of an incomplete trailing record
	names   map[string]string
}

// NewDecoder returns a decoder for files of kind k.
func NewDecoder(k FileKind) *Decoder {
	return &Decoder{kind: k, names: make(map[string]string)}
}

// Offset is the file offset just past the last complete record decoded.
func (d *Decoder) Offset() int64 { return d.off }

// Pending is the number of bytes of an incomplete trailing record held back.
func (d *Decoder) Pending() int { return len(d.pending) }

// Feed decodes the complete records in pending bytes + p into out. A
// corrupt record yields a *safefile.OffsetError; the decoder then stays at that offset.
func (d *Decoder) Feed(p []byte, out *Records) error {
	buf := p
	if len(d.pending) > 0 {
		d.pending = append(d.pending, p...)
		buf = d.pending
	}
	n, err := d.decode(buf, out)
	d.off += int64(n)
	rest := buf[n:]
	if len(d.pending) > 0 {
		// Shift the remainder down in place; pending owns its storage.
		k := copy(d.pending, rest)
		d.pending = d.pending[:k]
	} else if len(rest) > 0 {
		d.pending = append(d.pending[:0], rest...)
	}
	return err
}

func (d *Decoder) decode(b []byte, out *Records) (int, error) {
	switch d.kind {
	case KindPythonTracerFunc:
		n := len(b) / pyFuncSize * pyFuncSize
		for i := 0; i < n; i += pyFuncSize {
			r := b[i:]
			out.PyFuncs = append(out.PyFuncs, PythonTracerFuncRecord{
				TimeNS: le64(r[0:]), TID: le64(r[8:]), PID: le64(r[16:]), Key: le64(r[24:]), Tag: r[32],
			})
		}
		return n, nil
	case KindGC:
		n := len(b) / gcSize * gcSize
		for i := 0; i < n; i += gcSize {
			r := b[i:]
			out.GC = append(out.GC, GCRecord{PID: le64(r[0:]), StartNS: le64(r[8:]), EndNS: le64(r[16:])})
		}
		return n, nil
	case KindUnknown:
		return 0, &safefile.OffsetError{Offset: d.off, Err: errors.New("unknown FRAMEWORK file kind")}
	}
	fixed := d.fixedLen()
	i := 0
	for len(b)-i >= envHeaderLen {
		l := binary.LittleEndian.Uint32(b[i+2:])
		if l > maxRecordBytes {
			return i, &safefile.OffsetError{Offset: d.off + int64(i), Err: fmt.Errorf("record length %d exceeds limit %d", l, maxRecordBytes)}
		}
		end := i + envHeaderLen + int(l)
		if end > len(b) {
			break // partial record: wait for more bytes
		}
		v := b[i+envHeaderLen : end]
		if len(v) < fixed {
			out.SkippedRecs++
		} else if err := d.decodeValue(v, fixed, out); err != nil {
			return i, &safefile.OffsetError{Offset: d.off + int64(i), Err: err}
		}
		i = end
	}
	return i, nil
}

func (d *Decoder) fixedLen() int {
	switch d.kind {
	case KindOpRange:
		return opRangeFixed
	case KindOpMark:
		return opMarkFixed
	case KindMemory:
		return memoryFixed
	}
	return keyFixed
}

func (d *Decoder) decodeValue(v []byte, fixed int, out *Records) error {
	fields := v[fixed:]
	switch d.kind {
	case KindOpRange:
		r := OpRangeRecord{
			StartNS: int64(le64(v[0:])), EndNS: int64(le64(v[8:])), Seq: int64(le64(v[16:])),
			PID: le64(v[24:]), StartTID: le64(v[32:]), EndTID: le64(v[40:]), FwdTID: le64(v[48:]),
			Scope: v[56], Async: v[57] != 0,
		}
		// Inlined field walk: this is the hot loop of FRAMEWORK decoding.
		for i := 0; i < len(fields); {
			if len(fields)-i < envHeaderLen {
				return fmt.Errorf("field header truncated at value byte %d", fixed+i)
			}
			id := binary.LittleEndian.Uint16(fields[i:])
			l := binary.LittleEndian.Uint32(fields[i+2:])
			if uint64(l) > uint64(len(fields)-i-envHeaderLen) {
				return fmt.Errorf("field %d length %d overruns its record", id, l)
			}
			f := fields[i+envHeaderLen : i+envHeaderLen+int(l)]
			i += envHeaderLen + int(l)
			var dst *string
			switch id {
			case fieldName:
				dst = &r.Name
			case fieldInputDtypes:
				dst = &r.InputDtypes
			case fieldInputShapes:
				dst = &r.InputShapes
			case fieldInputTensors:
				dst = &r.InputTensors
			case fieldInputTensorLists:
				dst = &r.InputTensorLists
			case fieldInputScalars:
				dst = &r.InputScalars
			case fieldStack:
				dst = &r.Stack
			case fieldModule:
				dst = &r.Module
			case fieldExtraArgs:
				dst = &r.ExtraArgs
			default:
				continue
			}
			*dst = d.intern(f)
		}
		out.OpRanges = append(out.OpRanges, r)
	case KindOpMark:
		r := OpMarkRecord{
			TimeNS: int64(le64(v[0:])), Category: le64(v[8:]), CorrelationID: le64(v[16:]),
			TID: le64(v[24:]), PID: le64(v[32:]),
		}
		err := eachField(fields, func(id uint16, s []byte) {
			if id == 1 {
				r.Name = d.intern(s)
			}
		})
		if err != nil {
			return err
		}
		out.OpMarks = append(out.OpMarks, r)
	case KindMemory:
		out.Memory = append(out.Memory, MemoryUsageRecord{
			Ptr: int64(le64(v[0:])), TimeNS: int64(le64(v[8:])), AllocSize: int64(le64(v[16:])),
			TotalAllocated: int64(le64(v[24:])), TotalReserved: int64(le64(v[32:])),
			TotalActive: int64(le64(v[40:])), StreamPtr: int64(le64(v[48:])),
			DeviceType: int8(v[56]), DeviceIndex: int8(v[57]), Component: v[58], DataType: v[59],
			AllocatorType: v[60], TID: le64(v[61:]), PID: le64(v[69:]),
		})
	case KindPythonTracerHash:
		r := PythonTracerHashRecord{Key: le64(v)}
		err := eachField(fields, func(id uint16, s []byte) {
			if id == 1 {
				r.Value = fieldString(s)
			}
		})
		if err != nil {
			return err
		}
		out.PyHashes = append(out.PyHashes, r)
	case KindParamTensor:
		r := ParamTensorRecord{Key: le64(v)}
		err := eachField(fields, func(id uint16, s []byte) {
			switch id {
			case 1:
				r.ModuleParam = fieldString(s)
			case 2:
				r.OptimizerParam = fieldString(s)
			}
		})
		if err != nil {
			return err
		}
		out.Params = append(out.Params, r)
	}
	return nil
}

// eachField walks the TLV string fields after the constant block. A later
// field of the same id overwrites an earlier one (as in torch_npu).
func eachField(b []byte, fn func(id uint16, s []byte)) error {
	for i := 0; i < len(b); {
		if len(b)-i < envHeaderLen {
			return fmt.Errorf("field header truncated at value byte %d", i)
		}
		id := binary.LittleEndian.Uint16(b[i:])
		l := binary.LittleEndian.Uint32(b[i+2:])
		if uint64(l) > uint64(len(b)-i-envHeaderLen) {
			return fmt.Errorf("field %d length %d overruns its record", id, l)
		}
		s := b[i+envHeaderLen : i+envHeaderLen+int(l)]
		fn(id, s)
		i += envHeaderLen + int(l)
	}
	return nil
}

// fieldString decodes a field payload; invalid UTF-8 becomes "N/A" as in torch_npu.
func fieldString(s []byte) string {
	if !utf8.Valid(s) {
		return "N/A"
	}
	return string(s)
}

// intern returns a shared string for repeated field values: op names,
// shapes, dtypes and stacks repeat every step, so most fields cost a map
// lookup instead of an allocation.
func (d *Decoder) intern(s []byte) string {
	if len(s) > 4096 {
		return fieldString(s)
	}
	if v, ok := d.names[string(s)]; ok {
		return v
	}
	v := fieldString(s)
	if len(d.names) < 1<<16 {
		d.names[string(s)] = v
	}
	return v
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// ---- encoding (used by the Recorder's dumper) ----

func appendEnvelopeHeader(dst []byte, typ uint16, l int) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, typ)
	return binary.LittleEndian.AppendUint32(dst, uint32(l))
}

func appendField(dst []byte, id uint16, s string) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, id)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func fieldLen(s string) int { return envHeaderLen + len(s) }

// AppendOpRange appends r as a torch.op_range record. Empty optional fields
// are omitted; the name field is always written.
func AppendOpRange(dst []byte, r *OpRangeRecord) []byte {
	opt := [...]struct {
		id uint16
		s  string
	}{
		{fieldInputDtypes, r.InputDtypes}, {fieldInputShapes, r.InputShapes},
		{fieldInputTensors, r.InputTensors}, {fieldInputTensorLists, r.InputTensorLists},
		{fieldInputScalars, r.InputScalars}, {fieldStack, r.Stack}, {fieldModule, r.Module},
		{fieldExtraArgs, r.ExtraArgs},
	}
	l := opRangeFixed + fieldLen(r.Name)
	for _, f := range opt {
		if f.s != "" {
			l += fieldLen(f.s)
		}
	}
	dst = appendEnvelopeHeader(dst, envOpRange, l)
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, uint64(r.StartNS))
	dst = le.AppendUint64(dst, uint64(r.EndNS))
	dst = le.AppendUint64(dst, uint64(r.Seq))
	dst = le.AppendUint64(dst, r.PID)
	dst = le.AppendUint64(dst, r.StartTID)
	dst = le.AppendUint64(dst, r.EndTID)
	dst = le.AppendUint64(dst, r.FwdTID)
	dst = append(dst, r.Scope, b2u8(r.Async))
	dst = appendField(dst, fieldName, r.Name)
	for _, f := range opt {
		if f.s != "" {
			dst = appendField(dst, f.id, f.s)
		}
	}
	return dst
}

// AppendOpMark appends r as a torch.op_mark record.
func AppendOpMark(dst []byte, r *OpMarkRecord) []byte {
	dst = appendEnvelopeHeader(dst, envOpMark, opMarkFixed+fieldLen(r.Name))
	le := binary.LittleEndian
	dst = le.AppendUint64(dst, uint64(r.TimeNS))
	dst = le.AppendUint64(dst, r.Category)
	dst = le.AppendUint64(dst, r.CorrelationID)
	dst = le.AppendUint64(dst, r.TID)
	dst = le.AppendUint64(dst, r.PID)
	return appendField(dst, 1, r.Name)
}

// AppendMemoryUsage appends r as a torch.memory_usage record (83 bytes).
func AppendMemoryUsage(dst []byte, r *MemoryUsageRecord) []byte {
	dst = appendEnvelopeHeader(dst, envMemory, memoryFixed)
	le := binary.LittleEndian
	for _, v := range [...]int64{r.Ptr, r.TimeNS, r.AllocSize, r.TotalAllocated, r.TotalReserved, r.TotalActive, r.StreamPtr} {
		dst = le.AppendUint64(dst, uint64(v))
	}
	dst = append(dst, byte(r.DeviceType), byte(r.DeviceIndex), r.Component, r.DataType, r.AllocatorType)
	dst = le.AppendUint64(dst, r.TID)
	return le.AppendUint64(dst, r.PID)
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}
