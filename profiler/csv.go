package profiler

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/npumon/npumon/internal/safefile"
)

// ASCEND_PROFILER_OUTPUT CSV readers (docs/reference/profiler-format.md §5).
// Columns are found by header name, so older layouts
// (docs/reference/profiler-format.md §5.9) read as long as the needed columns
// exist; cells may carry a trailing TAB, N/A, quotes inside shape cells and
// multi-line text.

// MiB is the unit of the "(MB)" columns: 1 MB = 2^20 bytes.
const MiB = 1 << 20

// MaxCSVRecord bounds one CSV record (all its fields, quoted newlines
// included); a real row is under a few KiB. A longer one is refused with
// its row number before it is held whole.
const MaxCSVRecord = 1 << 20

// errRecordTooLong is the cause named for a record over MaxCSVRecord.
var errRecordTooLong = fmt.Errorf("a record over %d bytes (the limit for one CSV record)", MaxCSVRecord)

// recordLimiter feeds the csv.Reader and refuses to hand it more than
// MaxCSVRecord bytes (plus its read-ahead) past the end of the last whole
// record, so one endless field or record cannot grow memory.
type recordLimiter struct {
	r    io.Reader
	n    int64 // bytes handed out
	mark int64 // input offset just past the last whole record
}

// csvReadAhead is more than csv.Reader's bufio buffer may hold unread.
const csvReadAhead = 64 << 10

func (l *recordLimiter) Read(p []byte) (int, error) {
	room := l.mark + MaxCSVRecord + csvReadAhead - l.n
	if room <= 0 {
		return 0, errRecordTooLong
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	return n, err
}

type csvTable struct {
	name string
	lim  *recordLimiter
	r    *csv.Reader
	cols map[string]int
	row  int   // 1-based record number of the last record read (header = 1)
	err  error // the first missing required column; decodeRows returns it
}

func newCSVTable(r io.Reader, name string) (*csvTable, error) {
	lim := &recordLimiter{r: r}
	cr := csv.NewReader(lim)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = true
	t := &csvTable{name: name, lim: lim, r: cr, cols: map[string]int{}}
	hdr, err := t.read()
	if err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: empty file, no header", name)
		}
		return nil, fmt.Errorf("%s: row 1: %w", name, err)
	}
	t.row = 1
	for i, h := range hdr {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := t.cols[h]; !dup {
			t.cols[h] = i
		}
	}
	return t, nil
}

// need returns the index of a required column; a missing one is remembered
// in t.err (the first only) and ends decodeRows before any row is read.
func (t *csvTable) need(name string) int {
	i, ok := t.cols[name]
	if !ok {
		i = -1
		if t.err == nil {
			t.err = fmt.Errorf("%s: missing column %q", t.name, name)
		}
	}
	return i
}

// opt returns the index of an optional column, or -1.
func (t *csvTable) opt(names ...string) int {
	for _, n := range names {
		if i, ok := t.cols[n]; ok {
			return i
		}
	}
	return -1
}

// next returns the next record, or io.EOF.
// read reads one record, refusing one over MaxCSVRecord.
func (t *csvTable) read() ([]string, error) {
	rec, err := t.r.Read()
	if err == nil && t.r.InputOffset()-t.lim.mark > MaxCSVRecord {
		err = errRecordTooLong
	}
	t.lim.mark = t.r.InputOffset()
	return rec, err
}

func (t *csvTable) next() ([]string, error) {
	rec, err := t.read()
	if err == io.EOF {
		return nil, io.EOF
	}
	t.row++
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s: line %d: %w", t.name, pe.Line, pe.Err)
		}
		return nil, fmt.Errorf("%s: row %d: %w", t.name, t.row, err)
	}
	return rec, nil
}

// decodeRows decodes every record after the header with row, stopping at
// the first error; the rows decoded before it come back with it.
func decodeRows[T any](t *csvTable, row func(rec []string) (T, error)) ([]T, error) {
	if t.err != nil {
		return nil, t.err
	}
	var out []T
	for {
		rec, err := t.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		v, err := row(rec)
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

func (t *csvTable) errf(col string, val string, err error) error {
	return fmt.Errorf("%s: row %d: column %q: bad value %q: %v", t.name, t.row, col, truncate(val, 40), err)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// cell returns the cleaned cell i ("" when absent or N/A).
func cell(rec []string, i int) string {
	if i < 0 || i >= len(rec) {
		return ""
	}
	s := strings.TrimSpace(strings.Trim(rec[i], "\t"))
	if s == "N/A" || s == "NA" {
		return ""
	}
	return s
}

// parseUSToNS parses an epoch-µs time string ("1704161511420306.491") into
// ns exactly; other notations (spreadsheet "1.69512E+15") go through float.
func parseUSToNS(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	t := strings.TrimPrefix(s, "-")
	ip, fp, _ := strings.Cut(t, ".")
	if ip != "" && len(ip) <= 16 && allDigits(ip) && allDigits(fp) {
		n, _ := strconv.ParseInt(ip, 10, 64)
		if n > math.MaxInt64/1000-1 {
			return 0, errors.New("out of range")
		}
		var frac int64
		for i := 0; i < 3; i++ {
			frac *= 10
			if i < len(fp) {
				frac += int64(fp[i] - '0')
			}
		}
		v := n*1000 + frac
		if neg {
			v = -v
		}
		return v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("not a number")
	}
	return floatToInt(f * 1000)
}

// parseIntCell parses an integer cell, accepting spreadsheet float notation.
func parseIntCell(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	return parseScaled(s, 1)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func floatToInt(f float64) (int64, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 9e18 {
		return 0, errors.New("out of range")
	}
	return int64(math.Round(f)), nil
}

// parseScaled parses a float cell and multiplies it (MB → bytes etc.).
func parseScaled(s string, scale float64) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("not a number")
	}
	return floatToInt(f * scale)
}

// parseDevice parses "NPU:3" → 3; "CPU", "host" or empty → -1.
func parseDevice(s string) int {
	if rest, ok := strings.CutPrefix(s, "NPU:"); ok {
		s = rest
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<16 {
		return -1
	}
	return n
}

// readCSV opens path and decodes it with decode, naming the file in errors.
func readCSV[T any](path string, decode func(io.Reader, string) ([]T, error)) ([]T, error) {
	f, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decode(f, path)
}

// ReadMemoryRecordCSV reads memory_record.csv.
func ReadMemoryRecordCSV(path string) ([]MemoryRecord, error) {
	return readCSV(path, DecodeMemoryRecordCSV)
}

// DecodeMemoryRecordCSV decodes memory_record.csv content; name is used in errors.
func DecodeMemoryRecordCSV(r io.Reader, name string) ([]MemoryRecord, error) {
	t, err := newCSVTable(r, name)
	if err != nil {
		return nil, err
	}
	iTime := t.need("Timestamp(us)")
	iRes := t.need("Total Reserved(MB)")
	iComp, iAlloc, iAct := t.opt("Component"), t.opt("Total Allocated(MB)"), t.opt("Total Active(MB)")
	iStream, iDev := t.opt("Stream Ptr"), t.opt("Device Type", "Device")
	return decodeRows(t, func(rec []string) (_ MemoryRecord, err error) {
		m := MemoryRecord{Component: cell(rec, iComp), Device: parseDevice(cell(rec, iDev)), Kind: MemoryInvalid}
		if m.TimeNS, err = parseUSToNS(cell(rec, iTime)); err != nil {
			return m, t.errf("Timestamp(us)", cell(rec, iTime), err)
		}
		if s := cell(rec, iRes); s != "" {
			if m.Reserved, err = parseScaled(s, MiB); err != nil {
				return m, t.errf("Total Reserved(MB)", s, err)
			}
		}
		if s := cell(rec, iAlloc); s != "" {
			if m.Allocated, err = parseScaled(s, MiB); err != nil {
				return m, t.errf("Total Allocated(MB)", s, err)
			}
			m.HasAllocated = true
		}
		if s := cell(rec, iAct); s != "" {
			if m.Active, err = parseScaled(s, MiB); err != nil {
				return m, t.errf("Total Active(MB)", s, err)
			}
			m.HasActive = true
		}
		if s := cell(rec, iStream); s != "" {
			if m.Stream, err = parseIntCell(s); err != nil {
				return m, t.errf("Stream Ptr", s, err)
			}
		}
		return m, nil
	})
}

// ReadOperatorMemoryCSV reads operator_memory.csv (10- or 15-column layouts).
func ReadOperatorMemoryCSV(path string) ([]OpMemory, error) {
	return readCSV(path, DecodeOperatorMemoryCSV)
}

// DecodeOperatorMemoryCSV decodes operator_memory.csv content.
func DecodeOperatorMemoryCSV(r io.Reader, name string) ([]OpMemory, error) {
	t, err := newCSVTable(r, name)
	if err != nil {
		return nil, err
	}
	iName := t.need("Name")
	iSize := t.need("Size(KB)")
	iAllocT := t.need("Allocation Time(us)")
	type col struct {
		name  string
		i     int
		time  bool
		dst   func(*OpMemory) *int64
		scale float64
	}
	cols := []col{
		{"Allocation Time(us)", iAllocT, true, func(o *OpMemory) *int64 { return &o.AllocNS }, 0},
		{"Release Time(us)", t.opt("Release Time(us)"), true, func(o *OpMemory) *int64 { return &o.ReleaseNS }, 0},
		{"Active Release Time(us)", t.opt("Active Release Time(us)"), true, func(o *OpMemory) *int64 { return &o.ActiveReleaseNS }, 0},
		{"Allocation Total Allocated(MB)", t.opt("Allocation Total Allocated(MB)"), false, func(o *OpMemory) *int64 { return &o.AllocAllocated }, MiB},
		{"Allocation Total Reserved(MB)", t.opt("Allocation Total Reserved(MB)"), false, func(o *OpMemory) *int64 { return &o.AllocReserved }, MiB},
		{"Allocation Total Active(MB)", t.opt("Allocation Total Active(MB)"), false, func(o *OpMemory) *int64 { return &o.AllocActive }, MiB},
		{"Release Total Allocated(MB)", t.opt("Release Total Allocated(MB)"), false, func(o *OpMemory) *int64 { return &o.RelAllocated }, MiB},
		{"Release Total Reserved(MB)", t.opt("Release Total Reserved(MB)"), false, func(o *OpMemory) *int64 { return &o.RelReserved }, MiB},
		{"Release Total Active(MB)", t.opt("Release Total Active(MB)"), false, func(o *OpMemory) *int64 { return &o.RelActive }, MiB},
	}
	iStream, iDev := t.opt("Stream Ptr"), t.opt("Device Type")
	return decodeRows(t, func(rec []string) (_ OpMemory, err error) {
		o := OpMemory{Name: cell(rec, iName), Device: parseDevice(cell(rec, iDev)),
			AllocAllocated: -1, AllocReserved: -1, AllocActive: -1, RelAllocated: -1, RelReserved: -1, RelActive: -1}
		if s := cell(rec, iSize); s != "" {
			if o.Size, err = parseScaled(s, 1024); err != nil {
				return o, t.errf("Size(KB)", s, err)
			}
		}
		for _, c := range cols {
			s := cell(rec, c.i)
			if s == "" {
				continue
			}
			var v int64
			if c.time {
				v, err = parseUSToNS(s)
			} else {
				v, err = parseScaled(s, c.scale)
			}
			if err != nil {
				return o, t.errf(c.name, s, err)
			}
			*c.dst(&o) = v
		}
		if s := cell(rec, iStream); s != "" {
			if o.Stream, err = parseIntCell(s); err != nil {
				return o, t.errf("Stream Ptr", s, err)
			}
		}
		return o, nil
	})
}

// ReadOperatorDetailsCSV reads operator_details.csv. Its rows have no start
// times: the ops come back untimed, DurNS = Host Total Duration.
func ReadOperatorDetailsCSV(path string) ([]Op, error) {
	return readCSV(path, DecodeOperatorDetailsCSV)
}

// DecodeOperatorDetailsCSV decodes operator_details.csv content.
func DecodeOperatorDetailsCSV(r io.Reader, name string) ([]Op, error) {
	t, err := newCSVTable(r, name)
	if err != nil {
		return nil, err
	}
	iName := t.need("Name")
	iShapes, iStack := t.opt("Input Shapes"), t.opt("Call Stack")
	iTotal := t.opt("Host Total Duration(us)")
	return decodeRows(t, func(rec []string) (_ Op, err error) {
		o := Op{Name: cell(rec, iName), Seq: -1, Step: -1,
			InputShapes: joinLines(cell(rec, iShapes)), Stack: joinLines(cell(rec, iStack))}
		if s := cell(rec, iTotal); s != "" {
			if o.DurNS, err = parseUSToNS(s); err != nil {
				return o, t.errf("Host Total Duration(us)", s, err)
			}
		}
		return o, nil
	})
}

// joinLines undoes the analyser's ";\r\n" cell formatting.
func joinLines(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "")
	return strings.ReplaceAll(s, "\n", "")
}

// ReadKernelDetailsCSV reads kernel_details.csv.
func ReadKernelDetailsCSV(path string) ([]Kernel, error) {
	return readCSV(path, DecodeKernelDetailsCSV)
}

// DecodeKernelDetailsCSV decodes kernel_details.csv content.
func DecodeKernelDetailsCSV(r io.Reader, name string) ([]Kernel, error) {
	t, err := newCSVTable(r, name)
	if err != nil {
		return nil, err
	}
	iName := t.need("Name")
	iStart := t.need("Start Time(us)")
	iDur := t.need("Duration(us)")
	iType, iCore := t.opt("Type"), t.opt("Accelerator Core")
	iStep, iDev := t.opt("Step Id"), t.opt("Device_id")
	return decodeRows(t, func(rec []string) (_ Kernel, err error) {
		k := Kernel{Name: cell(rec, iName), Type: cell(rec, iType), Core: cell(rec, iCore), Step: -1, Device: -1}
		if k.StartNS, err = parseUSToNS(cell(rec, iStart)); err != nil {
			return k, t.errf("Start Time(us)", cell(rec, iStart), err)
		}
		if s := cell(rec, iDur); s != "" {
			if k.DurNS, err = parseUSToNS(s); err != nil {
				return k, t.errf("Duration(us)", s, err)
			}
		}
		if s := cell(rec, iStep); s != "" {
			if k.Step, err = strconv.ParseInt(s, 10, 64); err != nil {
				return k, t.errf("Step Id", s, err)
			}
		}
		if s := cell(rec, iDev); s != "" {
			k.Device = parseDevice(s)
		}
		return k, nil
	})
}

// StepTime is one step_trace_time.csv row (µs sums over the step).
type StepTime struct {
	Device                                        int // -1 when the file has no Device_id
	Step                                          int64
	ComputingUS, CommunicationUS, FreeUS, StageUS float64
}

// DecodeStepTraceTimeCSV decodes step_trace_time.csv content.
func DecodeStepTraceTimeCSV(r io.Reader, name string) ([]StepTime, error) {
	t, err := newCSVTable(r, name)
	if err != nil {
		return nil, err
	}
	iStep := t.need("Step")
	iDev := t.opt("Device_id")
	fcols := []struct {
		name string
		i    int
		dst  func(*StepTime) *float64
	}{
		{"Computing", t.opt("Computing"), func(s *StepTime) *float64 { return &s.ComputingUS }},
		{"Communication", t.opt("Communication"), func(s *StepTime) *float64 { return &s.CommunicationUS }},
		{"Free", t.opt("Free"), func(s *StepTime) *float64 { return &s.FreeUS }},
		{"Stage", t.opt("Stage"), func(s *StepTime) *float64 { return &s.StageUS }},
	}
	return decodeRows(t, func(rec []string) (_ StepTime, err error) {
		st := StepTime{Device: -1, Step: -1}
		if s := cell(rec, iStep); s != "" {
			if st.Step, err = strconv.ParseInt(s, 10, 64); err != nil {
				return st, t.errf("Step", s, err)
			}
		}
		if s := cell(rec, iDev); s != "" {
			st.Device = parseDevice(s)
		}
		for _, c := range fcols {
			if s := cell(rec, c.i); s != "" {
				f, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return st, t.errf(c.name, s, err)
				}
				*c.dst(&st) = f
			}
		}
		return st, nil
	})
}

// ReadStepTraceTimeCSV reads step_trace_time.csv.
func ReadStepTraceTimeCSV(path string) ([]StepTime, error) {
	return readCSV(path, DecodeStepTraceTimeCSV)
}

// ReadNPUModuleMemCSV reads npu_module_mem.csv (driver modules' reserved memory).
func ReadNPUModuleMemCSV(path string) ([]MemoryRecord, error) {
	return readCSV(path, DecodeNPUModuleMemCSV)
}

// DecodeNPUModuleMemCSV decodes npu_module_mem.csv content: one record per
// row, Component = the module (SLOG, HCCL, APP, …), Reserved only.
func DecodeNPUModuleMemCSV(r io.Reader, name string) ([]MemoryRecord, error) {
	t, err := newCSVTable(r, name)
	if err != nil {
		return nil, err
	}
	iTime := t.need("Timestamp(us)")
	iRes := t.need("Total Reserved(MB)")
	iComp, iDev, iDevID := t.opt("Component"), t.opt("Device"), t.opt("Device_id")
	return decodeRows(t, func(rec []string) (_ MemoryRecord, err error) {
		m := MemoryRecord{Component: cell(rec, iComp), Device: parseDevice(cell(rec, iDev)), Kind: MemoryInvalid}
		if m.Device < 0 {
			m.Device = parseDevice(cell(rec, iDevID))
		}
		if m.TimeNS, err = parseUSToNS(cell(rec, iTime)); err != nil {
			return m, t.errf("Timestamp(us)", cell(rec, iTime), err)
		}
		if s := cell(rec, iRes); s != "" {
			if m.Reserved, err = parseScaled(s, MiB); err != nil {
				return m, t.errf("Total Reserved(MB)", s, err)
			}
		}
		return m, nil
	})
}
