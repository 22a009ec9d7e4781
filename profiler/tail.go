package profiler

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/npumon/npumon/internal/oprange"
	"github.com/npumon/npumon/internal/safefile"
)

// Tailer follows FRAMEWORK files while torch_npu (or a Recorder) appends to
// them (docs/reference/profiler-format.md §2.9): it reads only new bytes,
// decodes whole records, keeps a cut trailing record until the rest arrives,
// and never re-reads. It follows a *_ascend_pt directory plus the later cycle
// directories of the same worker, or every profiler directory that appears
// under a parent directory.
type Tailer struct {
	root    string
	parent  string // directory scanned for new cycle directories
	prefix  string // worker prefix new cycle dirs must carry ("" = any)
	dirs    map[string]*tailDir
	order   []string
	maxRead int64
}

type tailDir struct {
	path     string
	files    map[string]*tailFile
	tb       *TimeBase
	exact    bool
	analysed bool
	marks    markPairer
}

type tailFile struct {
	off int64
	dec *Decoder
}

// TailBatch is what one Poll found. Times are epoch ns; while a run is live
// they come from the same-host clock pairing
// (docs/reference/profiler-format.md §3.4) and Approximate is set.
type TailBatch struct {
	NewDirs   []string // cycle directories seen for the first time
	Finalized []string // directories whose profiler_info appeared
	Analysed  []string // directories whose analyse.done appeared
	Ops       []Op     // sorted by start; Step is set only on ProfilerStep markers
	Steps     []Step   // ProfilerStep#N ranges completed in this batch (a step's marker
	// is written when the step ends, after its ops: assign earlier ops by time)
	Queue       []QueueRange
	Memory      []MemoryRecord // sorted by time
	Approximate bool
}

// Empty reports whether the batch carries nothing.
func (b *TailBatch) Empty() bool {
	return len(b.NewDirs)+len(b.Finalized)+len(b.Analysed)+len(b.Ops)+len(b.Queue)+len(b.Memory) == 0
}

var cycleSuffixRe = regexp.MustCompile(`_\d{17}_ascend_pt$`)

// NewTailer follows path: a *_ascend_pt directory (and the worker's later
// cycles beside it) or a parent directory where profiler directories appear.
func NewTailer(path string) (*Tailer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", path)
	}
	path = filepath.Clean(path)
	if filepath.Base(path) == FrameworkDir {
		path = filepath.Dir(path)
	}
	t := &Tailer{root: path, dirs: map[string]*tailDir{}, maxRead: 16 << 20}
	base := filepath.Base(path)
	if strings.HasSuffix(base, DirNameSuffix) || isProfilerDir(path) {
		t.parent = filepath.Dir(path)
		if loc := cycleSuffixRe.FindStringIndex(base); loc != nil {
			t.prefix = base[:loc[0]+1]
		} else {
			t.prefix = "\x00" // no cycle naming: follow only this directory
		}
		t.add(path)
	} else {
		t.parent = path
	}
	return t, nil
}

// Dirs lists the followed directories in the order they were found.
func (t *Tailer) Dirs() []string { return append([]string(nil), t.order...) }

func (t *Tailer) add(dir string) *tailDir {
	d := &tailDir{path: dir, files: map[string]*tailFile{}}
	t.dirs[dir] = d
	t.order = append(t.order, dir)
	return d
}

// scan adds new cycle directories under the parent.
func (t *Tailer) scan(b *TailBatch) {
	if t.prefix == "\x00" {
		return
	}
	ents, err := os.ReadDir(t.parent)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || !strings.HasSuffix(n, DirNameSuffix) {
			continue
		}
		if t.prefix != "" && !strings.HasPrefix(n, t.prefix) {
			continue
		}
		p := filepath.Join(t.parent, n)
		if _, ok := t.dirs[p]; !ok {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	for _, p := range names {
		if t.prefix != "" && len(t.order) > 0 && p < t.order[0] {
			continue // an older cycle of the same worker: not ours to follow
		}
		t.add(p)
		b.NewDirs = append(b.NewDirs, p)
	}
}

// Poll reads what was appended since the last call.
func (t *Tailer) Poll() (*TailBatch, error) {
	b := &TailBatch{}
	t.scan(b)
	for _, p := range t.order {
		d := t.dirs[p]
		if err := t.pollDir(d, b); err != nil {
			return b, err
		}
	}
	sort.SliceStable(b.Ops, func(i, j int) bool { return b.Ops[i].StartNS < b.Ops[j].StartNS })
	sort.SliceStable(b.Memory, func(i, j int) bool { return b.Memory[i].TimeNS < b.Memory[j].TimeNS })
	sort.Slice(b.Steps, func(i, j int) bool { return b.Steps[i].StartNS < b.Steps[j].StartNS })
	return b, nil
}

func (t *Tailer) pollDir(d *tailDir, b *TailBatch) error {
	if !d.exact {
		tb, ok, err := LoadTimeBase(d.path)
		if err == nil && ok {
			d.tb, d.exact = &tb, true
			b.Finalized = append(b.Finalized, d.path)
		}
	}
	fw := filepath.Join(d.path, FrameworkDir)
	ents, _ := os.ReadDir(fw)
	var recs Records
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		k := KindOf(e.Name())
		if k != KindOpRange && k != KindOpMark && k != KindMemory {
			continue // the other files are written once at stop; ReadDir reads them
		}
		f := d.files[e.Name()]
		if f == nil {
			f = &tailFile{dec: NewDecoder(k)}
			d.files[e.Name()] = f
		}
		if err := t.readNew(filepath.Join(fw, e.Name()), f, &recs); err != nil {
			return err
		}
	}
	fresh := len(recs.OpRanges)+len(recs.Memory)+len(recs.OpMarks) > 0
	if d.tb == nil && fresh {
		tb := LiveTimeBase(d.path, sampleRaw(&recs))
		d.tb = &tb
	}
	if d.tb != nil {
		if d.tb.Approximate && fresh {
			b.Approximate = true
		}
		ops := opsFromRecords(recs.OpRanges, d.tb)
		for i := range ops {
			ops[i].Step = -1
			if id, ok := oprange.StepNumber(ops[i].Name); ok {
				ops[i].IsStep, ops[i].Step = true, id
				b.Steps = append(b.Steps, Step{ID: id, StartNS: ops[i].StartNS, EndNS: ops[i].EndNS})
			}
		}
		b.Ops = append(b.Ops, ops...)
		b.Memory = append(b.Memory, memoryFromRecords(recs.Memory, d.tb)...)
		b.Queue = append(b.Queue, d.marks.pair(recs.OpMarks, d.tb)...)
	}
	if !d.analysed {
		if _, err := os.Stat(filepath.Join(d.path, OutputDir, AnalyseDone)); err == nil {
			d.analysed = true
			b.Analysed = append(b.Analysed, d.path)
		}
	}
	return nil
}

// readNew feeds the bytes appended to path since the last read.
func (t *Tailer) readNew(path string, f *tailFile, recs *Records) error {
	fh, err := safefile.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if st.Size() < f.off {
		return fmt.Errorf("%s: shrank from %d to %d bytes; FRAMEWORK files only grow", path, f.off, st.Size())
	}
	if st.Size() == f.off {
		return nil
	}
	if st.Size() > MaxFrameworkFile {
		return frameworkTooLarge(path, st.Size())
	}
	n := min(st.Size()-f.off, t.maxRead)
	buf := make([]byte, n)
	got, err := fh.ReadAt(buf, f.off)
	if err != nil && err != io.EOF {
		return fmt.Errorf("%s: %w", path, err)
	}
	f.off += int64(got)
	if err := f.dec.Feed(buf[:got], recs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Pending returns the bytes of cut trailing records held back, per file.
func (t *Tailer) Pending() map[string]int {
	out := map[string]int{}
	for _, p := range t.order {
		for name, f := range t.dirs[p].files {
			if n := f.dec.Pending(); n > 0 {
				out[filepath.Join(p, FrameworkDir, name)] = n
			}
		}
	}
	return out
}
