package profiler

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/npumon/npumon/internal/oprange"
)

// Analyse is npumon's analysis step for a FRAMEWORK-only directory: it writes
// ASCEND_PROFILER_OUTPUT/{operator_details,memory_record,operator_memory,
// step_trace_time}.csv and trace_view.json in torch_npu's layouts
// (docs/reference/profiler-format.md §5, §6), then analyse.done last. Times are
// epoch µs strings with 3 decimals.
func Analyse(dir string) error {
	d, err := readFramework(context.Background(), dir)
	if err != nil {
		return err
	}
	out := filepath.Join(dir, OutputDir)
	if err := os.MkdirAll(out, 0o750); err != nil {
		return err
	}
	steps := []struct {
		name string
		skip bool
		fn   func(io.Writer, *Data) error
	}{
		{"operator_details.csv", len(d.Ops) == 0, writeOperatorDetails},
		{"memory_record.csv", len(d.Memory) == 0, writeMemoryRecord},
		{"operator_memory.csv", len(d.Memory) == 0, writeOperatorMemory},
		{"step_trace_time.csv", false, writeStepTraceTime},
		{"trace_view.json", false, WriteTraceView},
	}
	for _, s := range steps {
		if s.skip { // the analyser omits files without rows
			continue
		}
		if err := writeFile(filepath.Join(out, s.name), func(w io.Writer) error { return s.fn(w, d) }); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(out, AnalyseDone), func(io.Writer) error { return nil })
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := fn(bw); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// usStr formats epoch ns as torch_npu's µs string ("1704161511420306.491").
func usStr(ns int64) string {
	neg := ""
	if ns < 0 {
		neg, ns = "-", -ns
	}
	return neg + strconv.FormatInt(ns/1000, 10) + "." + fmt.Sprintf("%03d", ns%1000)
}

// mbStr formats bytes as MB (2^20), shortest round-tripping float.
func mbStr(b int64) string { return strconv.FormatFloat(float64(b)/MiB, 'f', -1, 64) }

func newCSV(w io.Writer) *csv.Writer {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true // Python's csv.writer ends rows with \r\n
	return cw
}

// selfDurations computes host self time: total minus directly nested ops on the same thread.
func selfDurations(ops []Op) []int64 {
	self := make([]int64, len(ops))
	idx := make([]int, len(ops))
	for i := range ops {
		idx[i] = i
		self[i] = ops[i].DurNS
	}
	sort.SliceStable(idx, func(a, b int) bool {
		oa, ob := &ops[idx[a]], &ops[idx[b]]
		if oa.TID != ob.TID {
			return oa.TID < ob.TID
		}
		if oa.StartNS != ob.StartNS {
			return oa.StartNS < ob.StartNS
		}
		return oa.EndNS > ob.EndNS
	})
	var stack []int
	var tid uint64
	for _, i := range idx {
		o := &ops[i]
		if o.TID != tid {
			stack, tid = stack[:0], o.TID
		}
		for len(stack) > 0 && ops[stack[len(stack)-1]].EndNS < o.EndNS {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			self[stack[len(stack)-1]] -= o.DurNS
		}
		stack = append(stack, i)
	}
	return self
}

func lines(s string) string { return strings.ReplaceAll(s, ";", ";\r\n") }

func writeOperatorDetails(w io.Writer, d *Data) error {
	cw := newCSV(w)
	cw.Write([]string{"Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
		"Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
		"Device Total Duration With AICore(us)"})
	self := selfDurations(d.Ops)
	for i := range d.Ops {
		o := &d.Ops[i]
		cw.Write([]string{o.Name, lines(o.InputShapes), lines(o.Stack), usStr(self[i]), usStr(o.DurNS), "0", "0", "0", "0"})
	}
	cw.Flush()
	return cw.Error()
}

func writeMemoryRecord(w io.Writer, d *Data) error {
	cw := newCSV(w)
	cw.Write([]string{"Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)", "Stream Ptr", "Device Type"})
	for i := range d.Memory {
		m := &d.Memory[i]
		cw.Write([]string{m.Component, usStr(m.TimeNS) + "\t", mbStr(m.Allocated), mbStr(m.Reserved), mbStr(m.Active),
			strconv.FormatInt(m.Stream, 10), "NPU:" + strconv.Itoa(m.Device)})
	}
	cw.Flush()
	return cw.Error()
}

// writeOperatorMemory pairs MALLOC → FREE / BLOCK_FREE by pointer and names
// each allocation after the innermost op on its thread holding its time.
func writeOperatorMemory(w io.Writer, d *Data) error {
	cw := newCSV(w)
	cw.Write([]string{"Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
		"Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)", "Allocation Total Reserved(MB)",
		"Allocation Total Active(MB)", "Release Total Allocated(MB)", "Release Total Reserved(MB)",
		"Release Total Active(MB)", "Stream Ptr", "Device Type"})
	type alloc struct {
		m           *MemoryRecord
		free, bfree *MemoryRecord
	}
	var allocs []*alloc
	open := map[[2]uint64]*alloc{}
	for i := range d.Memory {
		m := &d.Memory[i]
		if m.Component != CompPTA {
			continue
		}
		k := [2]uint64{uint64(m.Device), m.Ptr}
		switch m.Kind {
		case MemoryMalloc:
			a := &alloc{m: m}
			allocs = append(allocs, a)
			open[k] = a
		case MemoryFree:
			if a := open[k]; a != nil && a.free == nil {
				a.free = m
			}
		case MemoryBlockFree:
			if a := open[k]; a != nil {
				a.bfree = m
				delete(open, k)
			}
		}
	}
	owner := opIndex(d.Ops)
	for _, a := range allocs {
		name := owner(a.m.TID, a.m.TimeNS)
		row := []string{name, strconv.FormatFloat(float64(a.m.AllocSize)/1024, 'f', -1, 64), usStr(a.m.TimeNS) + "\t",
			"", "", "", "", mbStr(a.m.Allocated), mbStr(a.m.Reserved), mbStr(a.m.Active), "", "", "",
			strconv.FormatInt(a.m.Stream, 10), "NPU:" + strconv.Itoa(a.m.Device)}
		rel := a.free
		if rel == nil {
			rel = a.bfree
		}
		if rel != nil {
			row[3] = usStr(rel.TimeNS) + "\t"
			row[5] = usStr(rel.TimeNS-a.m.TimeNS) + "\t"
			row[10], row[11], row[12] = mbStr(rel.Allocated), mbStr(rel.Reserved), mbStr(rel.Active)
		}
		if a.bfree != nil {
			row[4] = usStr(a.bfree.TimeNS) + "\t"
			row[6] = usStr(a.bfree.TimeNS-a.m.TimeNS) + "\t"
		}
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// opIndex returns a lookup of the op on thread tid an allocation at t
// (epoch ns) is attributed to: oprange.Innermost over that thread's ops.
func opIndex(ops []Op) func(tid uint64, t int64) string {
	byTID := map[uint64]*threadOps{} // each in start order (ops are sorted)
	for i := range ops {
		o := &ops[i]
		tab := byTID[o.TID]
		if tab == nil {
			tab = &threadOps{}
			byTID[o.TID] = tab
		}
		m := o.EndNS
		if n := len(tab.maxEnd); n > 0 {
			m = max(m, tab.maxEnd[n-1])
		}
		tab.ops, tab.maxEnd = append(tab.ops, o), append(tab.maxEnd, m)
	}
	for _, tab := range byTID {
		tab.idx.Update(tab, 0)
	}
	return func(tid uint64, t int64) string {
		if tab := byTID[tid]; tab != nil {
			if i := tab.idx.Innermost(tab, t); i >= 0 {
				return tab.ops[i].Name
			}
		}
		return ""
	}
}

// threadOps is one thread's ops (in finishOps order) as oprange.Table.
type threadOps struct {
	ops    []*Op
	maxEnd []int64
	idx    oprange.Index
}

func (t *threadOps) Len() int           { return len(t.ops) }
func (t *threadOps) Start(i int) int64  { return t.ops[i].StartNS }
func (t *threadOps) End(i int) int64    { return t.ops[i].EndNS }
func (t *threadOps) MaxEnd(i int) int64 { return t.maxEnd[i] }
func (t *threadOps) Skip(i int) bool    { return t.ops[i].IsStep }

// writeStepTraceTime writes one row per step. Without device data the whole
// step is host time: Free = Stage = step duration.
func writeStepTraceTime(w io.Writer, d *Data) error {
	cw := newCSV(w)
	cw.Write([]string{"Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
		"Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"})
	dev := "0"
	if len(d.Memory) > 0 {
		dev = strconv.Itoa(d.Memory[0].Device)
	}
	for _, s := range d.Steps {
		dur := strconv.FormatFloat(float64(s.EndNS-s.StartNS)/1000, 'f', -1, 64)
		cw.Write([]string{dev, strconv.FormatInt(s.ID, 10), "0", "0", "0", "0", dur, dur, "0", "0", "0"})
	}
	cw.Flush()
	return cw.Error()
}
