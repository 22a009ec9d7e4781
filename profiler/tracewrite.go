package profiler

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// WriteTraceView writes d as a torch_npu-style trace_view.json
// (docs/reference/profiler-format.md §6): a bare array of Chrome-trace events
// with epoch-µs string timestamps — process and thread metadata, cpu_op slices,
// enqueue/dequeue slices with their flows, fwd→bwd flows, GC slices and one
// memory counter track per device. It opens in Perfetto, chrome://tracing and
// MindStudio Insight.
func WriteTraceView(w io.Writer, d *Data) error {
	tw := &traceWriter{w: bufio.NewWriterSize(w, 256<<10)}
	tw.raw("[")
	pids := map[uint64]bool{}
	tids := map[[2]uint64]bool{}
	for i := range d.Ops {
		pids[d.Ops[i].PID] = true
		tids[[2]uint64{d.Ops[i].PID, d.Ops[i].TID}] = true
	}
	for i := range d.Queue {
		pids[d.Queue[i].PID] = true
		tids[[2]uint64{d.Queue[i].PID, d.Queue[i].TID}] = true
	}
	for _, pid := range sortedKeys(pids) {
		tw.meta(pid, 0, "process_name", `"name":"Python"`)
		tw.meta(pid, 0, "process_labels", `"labels":"CPU"`)
		tw.meta(pid, 0, "process_sort_index", `"sort_index":0`)
	}
	tk := make([][2]uint64, 0, len(tids))
	for k := range tids {
		tk = append(tk, k)
	}
	sort.Slice(tk, func(i, j int) bool { return tk[i][0] < tk[j][0] || tk[i][0] == tk[j][0] && tk[i][1] < tk[j][1] })
	for _, k := range tk {
		tw.meta(k[0], k[1], "thread_name", `"name":"Thread `+strconv.FormatUint(k[1], 10)+`"`)
		tw.meta(k[0], k[1], "thread_sort_index", `"sort_index":`+strconv.FormatUint(k[1], 10))
	}
	fwd := map[int64]*Op{} // forward op per sequence number
	for i := range d.Ops {
		o := &d.Ops[i]
		tw.begin("X", o.Name, o.PID, o.TID, o.StartNS)
		tw.raw(`,"dur":`)
		tw.dur(o.DurNS)
		tw.raw(`,"cat":"cpu_op","args":{"Sequence number":`)
		tw.int(o.Seq)
		tw.raw(`,"Fwd thread id":`)
		tw.int(int64(o.FwdTID))
		tw.optArg("Input Dims", o.InputShapes)
		tw.optArg("Input type", o.InputDtypes)
		tw.optArg("Call stack", o.Stack)
		tw.optArg("Module Hierarchy", o.Module)
		tw.raw("}}")
		if o.Seq >= 0 && o.FwdTID == 0 {
			fwd[o.Seq] = o
		}
	}
	for i := range d.Ops {
		o := &d.Ops[i]
		if o.FwdTID == 0 || o.Seq < 0 {
			continue
		}
		if f := fwd[o.Seq]; f != nil && f.TID != o.TID {
			tw.flow("s", "fwdbwd", "fwdbwd", o.Seq, f.PID, f.TID, f.StartNS)
			tw.flow("f", "fwdbwd", "fwdbwd", o.Seq, o.PID, o.TID, o.StartNS)
		}
	}
	for i := range d.Queue {
		q := &d.Queue[i]
		name, cat, ph := "Enqueue@"+q.Name, "enqueue", "s"
		if q.Dequeue {
			name, cat, ph = "Dequeue@"+q.Name, "dequeue", "f"
		}
		tw.begin("X", name, q.PID, q.TID, q.StartNS)
		tw.raw(`,"dur":`)
		tw.dur(q.EndNS - q.StartNS)
		tw.raw(`,"cat":"` + cat + `","args":{"correlation_id":`)
		tw.int(int64(q.CorrelationID))
		tw.raw("}}")
		tw.flow(ph, "enqueue_to_dequeue", "async_task_queue", int64(q.CorrelationID), q.PID, q.TID, q.StartNS)
	}
	for i := range d.GC {
		g := &d.GC[i]
		pid := g.PID<<10 | 1<<5
		tw.meta(pid, 0, "process_name", `"name":"Python GC"`)
		tw.meta(pid, 0, "process_sort_index", `"sort_index":1`)
		tw.begin("X", "GC", pid, g.PID, g.StartNS)
		tw.raw(`,"dur":`)
		tw.dur(g.EndNS - g.StartNS)
		tw.raw(`,"cat":"GC"}`)
	}
	named := map[int]bool{}
	for i := range d.Memory {
		m := &d.Memory[i]
		if m.Component != CompPTA && m.Component != CompWorkspace {
			continue
		}
		pid := memoryTrackPID(m.PID, m.Device)
		if !named[m.Device] {
			named[m.Device] = true
			tw.meta(pid, 0, "process_name", `"name":"NPU:`+strconv.Itoa(m.Device)+` Memory"`)
			tw.meta(pid, 0, "process_sort_index", `"sort_index":`+strconv.Itoa(2+m.Device))
		}
		tw.begin("C", m.Component+" Memory", pid, 0, m.TimeNS)
		tw.raw(`,"args":{"Allocated(MB)":` + mbStr(m.Allocated) + `,"Reserved(MB)":` + mbStr(m.Reserved) +
			`,"Active(MB)":` + mbStr(m.Active) + "}}")
	}
	tw.raw("]")
	if tw.err != nil {
		return tw.err
	}
	return tw.w.Flush()
}

func memoryTrackPID(pid uint64, dev int) uint64 { return pid<<10 | 2<<5 | uint64(dev&31) }

func sortedKeys(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

type traceWriter struct {
	w   *bufio.Writer
	n   int
	buf []byte
	err error
}

func (t *traceWriter) raw(s string) {
	if _, err := t.w.WriteString(s); err != nil && t.err == nil {
		t.err = err
	}
}

func (t *traceWriter) sep() {
	if t.n > 0 {
		t.raw(",\n")
	} else {
		t.raw("\n")
	}
	t.n++
}

func (t *traceWriter) int(v int64) { t.raw(strconv.FormatInt(v, 10)) }

func (t *traceWriter) dur(ns int64) {
	t.raw(strconv.FormatFloat(float64(ns)/1000, 'f', -1, 64))
}

func (t *traceWriter) str(s string) {
	t.buf = appendJSONString(t.buf[:0], s)
	if _, err := t.w.Write(t.buf); err != nil && t.err == nil {
		t.err = err
	}
}

// begin writes `{"ph":…,"name":…,"pid":…,"tid":…,"ts":"…"` (object left open).
func (t *traceWriter) begin(ph, name string, pid, tid uint64, ts int64) {
	t.sep()
	t.raw(`{"ph":"` + ph + `","name":`)
	t.str(name)
	t.raw(`,"pid":` + strconv.FormatUint(pid, 10) + `,"tid":` + strconv.FormatUint(tid, 10) + `,"ts":"` + usStr(ts) + `"`)
}

func (t *traceWriter) meta(pid, tid uint64, name, args string) {
	t.sep()
	t.raw(`{"ph":"M","name":"` + name + `","pid":` + strconv.FormatUint(pid, 10) + `,"tid":` +
		strconv.FormatUint(tid, 10) + `,"args":{` + args + `}}`)
}

func (t *traceWriter) flow(ph, name, cat string, id int64, pid, tid uint64, ts int64) {
	t.begin(ph, name, pid, tid, ts)
	t.raw(`,"bp":"e","id":` + strconv.FormatInt(id, 10) + `,"cat":"` + cat + `"}`)
}

// optArg writes a string arg unless empty; ';' lists are shown one per line
// as torch_npu does.
func (t *traceWriter) optArg(key, v string) {
	if v == "" {
		return
	}
	t.raw(`,"` + key + `":`)
	t.str(lines(v))
}

func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
