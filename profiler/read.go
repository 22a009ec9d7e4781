package profiler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/npumon/npumon/internal/safefile"
)

// Directory names (docs/reference/profiler-format.md §1).
const (
	FrameworkDir  = "FRAMEWORK"
	OutputDir     = "ASCEND_PROFILER_OUTPUT"
	AnalyseDone   = "analyse.done"
	DirNameSuffix = "_ascend_pt"
)

// ReadFrameworkFile decodes a whole FRAMEWORK file. A truncated trailing
// record is tolerated (reported through pending > 0), as torch_npu does.
func ReadFrameworkFile(path string, out *Records) (pending int, err error) {
	return readFrameworkFile(context.Background(), path, out)
}

// readFrameworkFile is ReadFrameworkFile stopping with ctx.Err() when ctx
// ends (it looks once per MiB read).
func readFrameworkFile(ctx context.Context, path string, out *Records) (pending int, err error) {
	k := KindOf(filepath.Base(path))
	if k == KindUnknown {
		return 0, fmt.Errorf("%s: not a FRAMEWORK file name", path)
	}
	f, err := safefile.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return 0, err
	} else if st.Size() > MaxFrameworkFile {
		return 0, frameworkTooLarge(path, st.Size())
	}
	d := NewDecoder(k)
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return d.Pending(), err
		}
		if d.Offset() > MaxFrameworkFile { // it grew while being read
			return d.Pending(), frameworkTooLarge(path, d.Offset())
		}
		n, rerr := f.Read(buf)
		if n > 0 {
			if err := d.Feed(buf[:n], out); err != nil {
				if de, ok := err.(*safefile.OffsetError); ok {
					de.File = path
					return d.Pending(), de
				}
				return d.Pending(), fmt.Errorf("%s: %w", path, err)
			}
		}
		if rerr == io.EOF {
			return d.Pending(), nil
		}
		if rerr != nil {
			return d.Pending(), fmt.Errorf("%s: %w", path, rerr)
		}
	}
}

// isProfilerDir reports whether dir looks like one *_ascend_pt directory.
func isProfilerDir(dir string) bool {
	for _, n := range []string{FrameworkDir, OutputDir} {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.IsDir() {
			return true
		}
	}
	return findProfilerInfo(dir) != "" || findHostDir(dir) != ""
}

// looksLikeOutputDir reports whether dir holds analysed CSV/JSON files itself.
func looksLikeOutputDir(dir string) bool {
	if filepath.Base(dir) == OutputDir {
		return true
	}
	return hasAnalysedText(dir) || findDB(dir) != ""
}

// hasAnalysedText reports whether dir holds analysed CSV/JSON files.
func hasAnalysedText(dir string) bool {
	for _, n := range []string{"trace_view.json", "memory_record.csv", "operator_details.csv", "kernel_details.csv", "operator_memory.csv"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// FindProfilerDirs returns the *_ascend_pt-like directories directly inside
// parent (one level, like the analyser), sorted by name (= creation time
// for one worker).
func FindProfilerDirs(parent string) []string {
	ents, _ := os.ReadDir(parent)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			p := filepath.Join(parent, e.Name())
			if isProfilerDir(p) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// IsProfilerPath reports whether path is something ReadDir reads: a
// profiler directory, an ASCEND_PROFILER_OUTPUT or FRAMEWORK directory, or
// a SQLite export (a file named like IsDBName).
func IsProfilerPath(path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	if !st.IsDir() {
		return IsDBName(filepath.Base(path))
	}
	return isProfilerDir(path) || looksLikeOutputDir(path) || filepath.Base(path) == FrameworkDir
}

// ReadDir reads a profiler directory: a *_ascend_pt directory, its
// ASCEND_PROFILER_OUTPUT or FRAMEWORK subdirectory, or a parent holding
// exactly one profiler directory. It prefers what is complete: analysed
// output once analyse.done exists, else the raw FRAMEWORK files (finished
// or still growing), else whatever analysed files exist. Analysed output is
// the CSV/JSON files, or the SQLite export (ReadDB) where there are none.
// A path to a .db file is read with ReadDB.
func ReadDir(path string) (*Data, error) {
	return ReadDirContext(context.Background(), path)
}

// ReadDirContext is ReadDir stopping with ctx.Err() when ctx ends: raw
// FRAMEWORK files are read a MiB at a time with a look at ctx in between;
// analysed output and SQLite exports are read whole once started. What
// Sanity finds implausible is added to Warnings.
func ReadDirContext(ctx context.Context, path string) (*Data, error) {
	d, err := readDirContext(ctx, path)
	if err != nil {
		return nil, err
	}
	d.Warnings = append(d.Warnings, Sanity(d)...)
	return d, nil
}

func readDirContext(ctx context.Context, path string) (*Data, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		// A file is read by its content: an SQLite export whatever its
		// name, else a trace_view.json (ReadTraceViewFile says if not).
		if _, err := checkSQLiteHeader(path); err == nil || strings.HasSuffix(path, ".db") {
			return ReadDB(path) // a .db that is no database: ReadDB says so
		}
		return ReadTraceViewFile(path)
	}
	root, base := path, filepath.Base(filepath.Clean(path))
	switch {
	case base == FrameworkDir || base == OutputDir:
		root = filepath.Dir(filepath.Clean(path))
	case !isProfilerDir(path) && !looksLikeOutputDir(path):
		dirs := FindProfilerDirs(path)
		switch len(dirs) {
		case 0:
			return nil, fmt.Errorf("%s: no FRAMEWORK/, %s/ or profiler_info*.json: not a profiler directory", path, OutputDir)
		case 1:
			root = dirs[0]
		default:
			return nil, fmt.Errorf("%s: holds %d profiler directories (%s …); name one", path, len(dirs), filepath.Base(dirs[0]))
		}
	}
	out := filepath.Join(root, OutputDir)
	if base != OutputDir && looksLikeOutputDir(path) {
		out, root = path, path // a bare directory of analysed files
	}
	_, doneErr := os.Stat(filepath.Join(out, AnalyseDone))
	fw := filepath.Join(root, FrameworkDir)
	hasFW := hasFrameworkFiles(fw)
	hasOut := looksLikeOutputDir(out) && dirExists(out)
	db := ""
	if hasOut && !hasAnalysedText(out) {
		db = findDB(out)
	}
	switch {
	case doneErr == nil && db != "":
		return readDBIn(root, db)
	case doneErr == nil && hasOut:
		return readAnalysed(root, out, true)
	case hasFW:
		return readFramework(ctx, root)
	case db != "":
		return readDBIn(root, db)
	case hasOut:
		return readAnalysed(root, out, false)
	}
	return nil, fmt.Errorf("%s: no FRAMEWORK files and no analysed output yet", root)
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func hasFrameworkFiles(fw string) bool {
	ents, err := os.ReadDir(fw)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if !e.IsDir() && KindOf(e.Name()) != KindUnknown {
			return true
		}
	}
	return false
}

// readFramework decodes FRAMEWORK/ and converts times with the dir's time base.
func readFramework(ctx context.Context, root string) (*Data, error) {
	d := &Data{Path: root, Source: SourceFramework}
	tb, ok, err := LoadTimeBase(root)
	if err != nil {
		return nil, err
	}
	d.Complete = ok
	fw := filepath.Join(root, FrameworkDir)
	ents, err := os.ReadDir(fw)
	if err != nil {
		return nil, err
	}
	var recs Records
	for _, e := range ents {
		if e.IsDir() || KindOf(e.Name()) == KindUnknown {
			continue
		}
		p := filepath.Join(fw, e.Name())
		pending, err := readFrameworkFile(ctx, p, &recs)
		if err != nil {
			return nil, err
		}
		if pending > 0 {
			d.Warnings = append(d.Warnings, fmt.Sprintf("%s: %d bytes of a truncated trailing record ignored", p, pending))
		}
	}
	if recs.SkippedRecs > 0 {
		d.Warnings = append(d.Warnings, fmt.Sprintf("%s: %d records shorter than their fixed block skipped", fw, recs.SkippedRecs))
	}
	if !ok {
		tb = LiveTimeBase(root, sampleRaw(&recs))
	}
	d.TimeBase = &tb
	d.Ops = opsFromRecords(recs.OpRanges, &tb)
	d.finishOps()
	var mp markPairer
	d.Queue = mp.pair(recs.OpMarks, &tb)
	d.Memory = memoryFromRecords(recs.Memory, &tb)
	d.sortMemory()
	for _, g := range recs.GC {
		d.GC = append(d.GC, GCEvent{PID: g.PID, StartNS: tb.EpochNS(int64(g.StartNS)), EndNS: tb.EpochNS(int64(g.EndNS))})
	}
	// Analysed tables that only the analyser can make still come from its output.
	out := filepath.Join(root, OutputDir)
	if p := filepath.Join(out, "kernel_details.csv"); fileExists(p) {
		if d.Kernels, err = ReadKernelDetailsCSV(p); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// sampleRaw returns the latest raw time in recs, to classify the raw clock.
func sampleRaw(recs *Records) int64 {
	var s int64
	for i := range recs.OpRanges {
		s = max(s, recs.OpRanges[i].EndNS)
	}
	for i := range recs.Memory {
		s = max(s, recs.Memory[i].TimeNS)
	}
	for i := range recs.OpMarks {
		s = max(s, recs.OpMarks[i].TimeNS)
	}
	return s
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// readAnalysed reads ASCEND_PROFILER_OUTPUT files.
func readAnalysed(root, out string, done bool) (*Data, error) {
	d := &Data{Path: root, Source: SourceAnalysed, Complete: done}
	var err error
	tv := filepath.Join(out, "trace_view.json")
	if fileExists(tv) {
		terr := readTraceViewOps(tv, d)
		if errors.Is(terr, ErrTruncatedTrace) {
			d.Warnings = append(d.Warnings, terr.Error())
		} else if terr != nil {
			return nil, terr
		}
	}
	if len(d.Ops) == 0 {
		if p := filepath.Join(out, "operator_details.csv"); fileExists(p) {
			if d.Ops, err = ReadOperatorDetailsCSV(p); err != nil {
				return nil, err
			}
		}
	}
	d.finishOps()
	if p := filepath.Join(out, "memory_record.csv"); fileExists(p) {
		if d.Memory, err = ReadMemoryRecordCSV(p); err != nil {
			return nil, err
		}
	}
	if err := d.mergeRawMemory(root); err != nil {
		return nil, err
	}
	d.sortMemory()
	if p := filepath.Join(out, "operator_memory.csv"); fileExists(p) {
		if d.OpMemory, err = ReadOperatorMemoryCSV(p); err != nil {
			return nil, err
		}
	}
	if p := filepath.Join(out, "kernel_details.csv"); fileExists(p) {
		if d.Kernels, err = ReadKernelDetailsCSV(p); err != nil {
			return nil, err
		}
	}
	if p := filepath.Join(out, "npu_module_mem.csv"); fileExists(p) {
		if d.ModuleMemory, err = ReadNPUModuleMemCSV(p); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// mergeRawMemory replaces the PTA and WORKSPACE rows of memory_record.csv
// with the records they were made from when the directory still has
// FRAMEWORK/torch.memory_usage (torch_npu keeps FRAMEWORK after analysis):
// exact bytes instead of MB, and the pointer and size of every event, which
// make a trace. The other components (GE, PTA+GE, APP) come from CANN data
// and stay as the CSV has them.
func (d *Data) mergeRawMemory(root string) error {
	p := filepath.Join(root, FrameworkDir, FileMemory)
	if !fileExists(p) {
		return nil
	}
	var recs Records
	if _, err := ReadFrameworkFile(p, &recs); err != nil {
		return err
	}
	tb, ok, err := LoadTimeBase(root)
	if err != nil {
		return err
	}
	if !ok {
		tb = LiveTimeBase(root, sampleRaw(&recs))
	}
	kept := d.Memory[:0]
	for _, m := range d.Memory {
		if m.Component != CompPTA && m.Component != CompWorkspace {
			kept = append(kept, m)
		}
	}
	d.Memory = append(kept, memoryFromRecords(recs.Memory, &tb)...)
	return nil
}

// ReadTraceViewFile reads a trace_view.json given on its own (Source
// SourceAnalysed): its cpu_op slices are the ops and its enqueue/dequeue
// ranges the queue. It holds no memory records.
func ReadTraceViewFile(path string) (*Data, error) {
	d := &Data{Path: path, Source: SourceAnalysed, Complete: true}
	err := readTraceViewOps(path, d)
	if errors.Is(err, ErrTruncatedTrace) {
		d.Warnings = append(d.Warnings, err.Error())
	} else if err != nil {
		return nil, err
	}
	d.finishOps()
	return d, nil
}

// readTraceViewOps collects cpu_op slices and queue ranges from trace_view.json.
func readTraceViewOps(path string, d *Data) error {
	f, err := safefile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && d.Ops == nil {
		// a cpu_op event takes ~200–400 bytes; sizing ahead saves most regrowth
		d.Ops = make([]Op, 0, min(st.Size()/512, 1<<22))
	}
	return ReadTraceView(f, path, func(ev *TraceEvent) error {
		if ev.Ph != "X" || !ev.HasTs {
			return nil
		}
		switch ev.Cat {
		case "cpu_op":
			d.Ops = append(d.Ops, Op{
				Name: ev.Name, StartNS: ev.TsNS, EndNS: ev.TsNS + ev.DurNS, DurNS: ev.DurNS,
				PID: uint64(ev.PID), TID: uint64(ev.TID), FwdTID: uint64(ev.FwdTID), Seq: ev.Seq,
				InputDtypes: ev.InputType, InputShapes: ev.InputDims, Stack: ev.CallStack, Module: ev.Module,
			})
		case "enqueue", "dequeue":
			name := ev.Name
			if i := strings.IndexByte(name, '@'); i >= 0 {
				name = name[i+1:]
			}
			d.Queue = append(d.Queue, QueueRange{
				Name: name, Dequeue: ev.Cat == "dequeue", StartNS: ev.TsNS, EndNS: ev.TsNS + ev.DurNS,
				TID: uint64(ev.TID), PID: uint64(ev.PID), CorrelationID: uint64(max(ev.CorrID, 0)),
			})
		}
		return nil
	})
}
