package replay

import (
	"bufio"
	"fmt"
	"io"

	"github.com/npumon/npumon/allocator/snapshot"
)

// npumon's compact JSON (docs/files.md, "Compact JSON"): the torch 2.x dict
// layout with each distinct frame and each distinct stack written once, in
// two tables at the top, and every "frames" list replaced by a "stack"
// index into the stack table. The first key, "npumon_compact", marks the
// form and holds its version; the decoder reads the form back (json.go)
// into the same model as the pickle it came from.

// CompactVersion is the version of the compact form WriteCompactJSON
// writes; the decoder reads versions up to it.
const CompactVersion = 1

// Keys of the compact form.
const (
	compactKey    = "npumon_compact" // the first key; its value is the version
	frameTableKey = "frame_table"    // [{"filename", "line", "name"}, …]
	stackTableKey = "stack_table"    // [[frame index, …], …], innermost frame first
	stackRefKey   = "stack"          // in segments, blocks, history records and trace entries
)

// compactTables are the tables a compact export writes first.
type compactTables struct {
	stacks   []snapshot.StackID // stack_table, in the order the writer first names each stack
	frames   []snapshot.Frame   // frame_table, in the order the stacks first hold each frame
	frameIdx map[snapshot.Frame]int
}

// WriteCompactJSON writes s as npumon's compact JSON: the layout WriteJSON
// writes, except that each distinct frame and stack is written once, in
// "frame_table" and "stack_table" at the top, and a block or entry names
// its stack by index ("stack": 3) instead of listing its frames. It is
// as large as the model, where WriteJSON's output grows with every
// reference to a shared stack. The torch 1.13 list layout has no place
// for the tables: with ExportList113 it writes what WriteJSON does.
func WriteCompactJSON(w io.Writer, s *snapshot.Snapshot, schema ExportSchema) error {
	if schema == ExportList113 {
		return WriteJSON(w, s, schema)
	}
	j := &jsonEmitter{w: bufio.NewWriterSize(w, 1<<20), snap: s, first: []bool{true}}
	j.index, j.table = compactIndex(s, schema)
	writeSnapshot(j, s, schema)
	j.w.WriteByte('\n')
	return j.w.Flush()
}

// compactIndex numbers the stacks in the order the writer names them (a
// dry run of the writer) and their frames in the order the stacks hold
// them.
func compactIndex(s *snapshot.Snapshot, schema ExportSchema) (map[snapshot.StackID]int, compactTables) {
	c := &stackCollector{index: map[snapshot.StackID]int{}}
	writeSnapshot(c, s, schema)
	t := compactTables{stacks: c.order, frameIdx: map[snapshot.Frame]int{}}
	for _, id := range t.stacks {
		for _, f := range s.Stack(id) {
			if _, ok := t.frameIdx[f]; !ok {
				t.frameIdx[f] = len(t.frames)
				t.frames = append(t.frames, f)
			}
		}
	}
	return c.index, t
}

// top writes the compact form's marker and tables (nothing for the inline
// form).
func (j *jsonEmitter) top() {
	if j.index == nil {
		return
	}
	j.key(compactKey)
	j.int(CompactVersion)
	j.key(frameTableKey)
	j.beginList()
	writeFrames(j, j.table.frames)
	j.endList()
	j.key(stackTableKey)
	j.beginList()
	for _, id := range j.table.stacks {
		j.beginList()
		for _, f := range j.snap.Stack(id) {
			j.int(int64(j.table.frameIdx[f]))
		}
		j.endList()
	}
	j.endList()
}

// stackCollector is an emitter that writes nothing: it records the stacks
// in the order the writer names them.
type stackCollector struct {
	index map[snapshot.StackID]int
	order []snapshot.StackID
}

func (c *stackCollector) frames(id snapshot.StackID) {
	if _, ok := c.index[id]; !ok {
		c.index[id] = len(c.order)
		c.order = append(c.order, id)
	}
}
func (c *stackCollector) top()                 {}
func (c *stackCollector) beginDict()           {}
func (c *stackCollector) key(string)           {}
func (c *stackCollector) endDict()             {}
func (c *stackCollector) beginList()           {}
func (c *stackCollector) endList()             {}
func (c *stackCollector) int(int64)            {}
func (c *stackCollector) uint(uint64)          {}
func (c *stackCollector) str(string)           {}
func (c *stackCollector) boolean(bool)         {}
func (c *stackCollector) float(float64)        {}
func (c *stackCollector) pair(snapshot.PoolID) {}

// compactRefs is what the decoder knows of a compact file's tables.
type compactRefs struct {
	on         bool     // the file opened with "npumon_compact"
	frames     []uint32 // frame_table: the builder's frame ids
	haveFrames bool
	haveStacks bool
	fids       []uint32           // stack_table rows, one after another
	ends       []int              // where each row ends in fids
	ids        []snapshot.StackID // each row's stack once first named, -1 before
}

// row adds the frame at frame_table index v to the stack_table row being
// read.
func (r *compactRefs) row(b *builder, v val) error {
	if v.k != kInt {
		return fmt.Errorf("want a frame_table index, got %s", v.k)
	}
	if i := int64(v.n); i < 0 || i >= int64(len(r.frames)) {
		return fmt.Errorf("frame %d is not in frame_table (%d frames)", i, len(r.frames))
	}
	i := int64(v.n)
	b.charge(4)
	r.fids = append(r.fids, r.frames[i])
	return nil
}

// endRow closes the stack_table row being read.
func (r *compactRefs) endRow(b *builder) {
	b.charge(16)
	r.ends = append(r.ends, len(r.fids))
	r.ids = append(r.ids, -1)
}

// stack resolves a "stack" value of dict d to its StackID, interning the
// row the first time it is named (so stacks get their ids in the order
// the file names them, as in the inline form).
func (r *compactRefs) stack(b *builder, d *dict, v val) (snapshot.StackID, error) {
	kind := d.kind.String()
	if d.kind == dUnknown {
		kind = "dict"
	}
	if v.k != kInt {
		return 0, &keyError{kind: kind, key: stackRefKey, err: fmt.Errorf("want a stack_table index, got %s", v.k)}
	}
	i := int64(v.n)
	if i < 0 || i >= int64(len(r.ends)) {
		return 0, &keyError{kind: kind, key: stackRefKey, err: fmt.Errorf("stack %d is not in stack_table (%d stacks)", i, len(r.ends))}
	}
	if id := r.ids[i]; id >= 0 {
		return id, nil
	}
	start := 0
	if i > 0 {
		start = r.ends[i-1]
	}
	id := b.internStack(r.fids[start:r.ends[i]])
	r.ids[i] = id
	return id, nil
}

// rowStart is where the stack_table row being read begins in fids.
func (r *compactRefs) rowStart() int {
	if len(r.ends) == 0 {
		return 0
	}
	return r.ends[len(r.ends)-1]
}

// topKey takes a top-level key of the compact form: the marker (only as
// the first key, n is the key's position) and, in a compact file, the
// frame table. handled is false for every other key, which goes to the
// builder. The stack table never reaches here as a list: the decoder
// reads its rows itself.
func (r *compactRefs) topKey(b *builder, key string, v val, n int) (handled bool, err error) {
	bad := func(format string, args ...any) (bool, error) {
		return true, &keyError{kind: "snapshot", key: key, err: fmt.Errorf(format, args...)}
	}
	switch {
	case key == compactKey:
		if n != 1 {
			return bad("must be the first key, before the tables and the \"stack\" references it governs (were the keys sorted? such tools want export --pretty)")
		}
		if v.k != kInt {
			return bad("want the version, an int, got %s", v.k)
		}
		if ver := int64(v.n); ver < 1 || ver > CompactVersion {
			return bad("version %d; this npumon reads compact JSON up to version %d", ver, CompactVersion)
		}
		r.on = true
		return true, nil
	case !r.on:
		return false, nil
	case key == frameTableKey:
		if r.haveFrames {
			return bad("given twice")
		}
		if v.k != kList {
			return bad("want a list of frames, got %s", v.k)
		}
		if err := b.ensureList(v.l, lFrames); err != nil {
			return bad("want a list of frame dicts ({\"filename\", \"line\", \"name\"})")
		}
		r.frames = append([]uint32(nil), v.l.fids...)
		r.haveFrames = true
		return true, nil
	case key == stackTableKey:
		return bad("want a list of stacks, got %s", v.k)
	}
	return false, nil
}

// misplaced is the error for a container opened where the stack table
// wants something else.
func (r *compactRefs) misplaced(tab uint8, what string) error {
	err := fmt.Errorf("stack %d: want a list of frame_table indices, got %s", len(r.ends), what)
	if tab == tabRow {
		err = fmt.Errorf("stack %d, item %d: want a frame_table index, got %s", len(r.ends), len(r.fids)-r.rowStart(), what)
	}
	return &keyError{kind: "snapshot", key: stackTableKey, err: err}
}
