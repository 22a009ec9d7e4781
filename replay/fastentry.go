package replay

import (
	"encoding/binary"
	"unicode/utf8"

	"github.com/npumon/npumon/allocator/snapshot"
)

// A snapshot is mostly trace entries, and a pickler writes each one the
// same way: EMPTY_DICT, MEMOIZE, MARK, then key/value pairs whose keys are
// memo references to strings already written, and SETITEMS. fastEntry
// reads that shape straight from the read buffer into a TraceEntry — about
// 25 opcodes an entry without a VM value each — and pushes one kEntry
// value, which the trace list's APPENDS then places. Anything else (a key
// or frame seen for the first time, a value of another type, an entry
// across the end of the buffer, an unknown key) leaves the decoder as it
// was, and the opcodes go the general way, which decides every error. The
// one difference a pickle can see: a fast-decoded dict is placed at once
// for the memo, so a reference to it before its list takes it fails as a
// reference to a placed dict does (a snapshot never shares entry dicts).

// cursor reads opcodes from the read buffer without refilling it.
type cursor struct {
	buf  []byte // the valid part of the read buffer
	p    int
	base int64 // file offset of buf[0]
}

// op consumes the next opcode, skipping FRAMEs (a frame may begin between
// any two opcodes); false at the end of the buffer.
func (c *cursor) op() (byte, bool) {
	for c.p < len(c.buf) {
		o := c.buf[c.p]
		if o != opFrame {
			c.p++
			return o, true
		}
		c.p += 9
	}
	return 0, false
}

// peek is op without consuming the opcode (FRAMEs before it are consumed).
func (c *cursor) peek() (byte, bool) {
	o, ok := c.op()
	if ok {
		c.p--
	}
	return o, ok
}

// bytes consumes the next n bytes.
func (c *cursor) bytes(n int) ([]byte, bool) {
	if len(c.buf)-c.p < n {
		return nil, false
	}
	s := c.buf[c.p : c.p+n]
	c.p += n
	return s, true
}

// index consumes the memo index of a BINGET or LONG_BINGET (o).
func (c *cursor) index(o byte) (uint64, bool) {
	if o == opBinGet {
		p, ok := c.bytes(1)
		if !ok {
			return 0, false
		}
		return uint64(p[0]), true
	}
	p, ok := c.bytes(4)
	if !ok {
		return 0, false
	}
	return uint64(binary.LittleEndian.Uint32(p)), true
}

// fastPut is a memo store fastEntry makes once the whole entry is read.
type fastPut struct {
	i   uint64
	off int64 // input offset after the opcode: the index's bound
	v   val   // kStr: a new string; kStack: a frames list's stack; kNone: the entry dict (placed)
}

// fastState is fastEntry's scratch, kept on the decoder between entries.
type fastState struct {
	puts [8]fastPut
	n    int // puts used
	next uint64
	// A frames list read inline is interned at commit (an entry given up
	// must not leave a stack behind): its frame ids, whether the entry's
	// frames are those, and its memo store (-1: none).
	fids     []uint32
	inline   bool
	framePut int
	te       snapshot.TraceEntry
	d        dict // kind dTrace, te: &te, for setTrace's error messages

	count int // entries decoded this way (tests)

	// Keys already resolved, by memo index (i&63): every entry names the
	// same few. Valid while no memo slot has been overwritten (rewrites).
	keys     [64]fastKey
	rewrites uint64
}

type fastKey struct {
	i  uint64
	ok bool
	v  val // the string's memo value
}

// batchList returns the list whose MARK … APPENDS batch the value about to
// be pushed is an element of, if it is a trace list or a list that has no
// kind yet (the first batch of a trace); else nil.
func (d *decoder) batchList() *list {
	n := len(d.marks)
	if n == 0 || d.noFast {
		return nil
	}
	m := d.marks[n-1]
	if m == 0 {
		return nil
	}
	t := &d.stack[m-1]
	if t.k != kList || (t.l.kind != lTraces && !t.l.untyped()) {
		return nil
	}
	return t.l
}

// untyped reports whether l has no kind and holds nothing yet: the first
// trace entry it takes makes it a trace list.
func (l *list) untyped() bool {
	return l.kind == lUnknown && l.scalar == kNone && len(l.pendingItems()) == 0
}

// fastEntry decodes the trace-entry dict whose EMPTY_DICT was just read
// and pushes it as a kEntry value, or returns false having changed
// nothing. For a list without a kind yet, the dict must have a key that
// makes it a trace entry ("action", …), as the general way decides.
func (d *decoder) fastEntry(l *list) bool {
	in, b, f := d.in, d.b, &d.fast
	c := cursor{buf: in.buf[:in.end], p: in.pos, base: in.base}
	f.n, f.next = 0, d.memo.count
	f.fids, f.inline, f.framePut = f.fids[:0], false, -1
	f.te = snapshot.TraceEntry{}
	f.d.kind, f.d.te = dTrace, &f.te
	if !d.fastMemo(&c, val{k: kNone}) {
		return false
	}
	if o, ok := c.op(); !ok || o != opMark {
		return false
	}
	decided := l.kind == lTraces
	for {
		o, ok := c.op()
		if !ok {
			return false
		}
		if o == opSetItems {
			break
		}
		if o != opBinGet && o != opLongBinGet {
			return false
		}
		k := d.fastKey(&c, o)
		if k == nil || k.n == tkForwardFrames {
			return false // forward_frames (rare) goes the general way
		}
		var v val
		if !d.fastValue(&c, k.n, &v) {
			return false
		}
		if k.n == tkFrames {
			if f.inline {
				return false // a second "frames" key: the general way
			}
			if f.inline = v.k == kList; f.inline { // fastFrames' mark
				continue
			}
		}
		if b.setTrace(&f.d, k.n, k.s, &v) != nil {
			return false // the general way reports it, at its offset
		}
		decided = decided || kindForKey(k.s) == dTrace
	}
	if !decided {
		return false
	}
	// Commit: check every memo store before making any.
	for j := range f.n {
		if p := &f.puts[j]; p.i >= maxMemo || int64(p.i) > p.off {
			return false
		}
	}
	if len(d.stack)+d.slack >= maxStackDepth {
		return false
	}
	if f.inline {
		b.charge(listBytes + elemBytes*int64(len(f.fids)))
		f.te.Frames = b.internStack(f.fids)
	}
	if f.framePut >= 0 {
		f.puts[f.framePut].v.n = uint64(f.te.Frames)
	}
	for j := range f.n {
		p := &f.puts[j]
		if p.v.k == kStr {
			_ = d.memo.put(p.i, p.v, p.off) // checked above
			continue
		}
		sl, _ := d.memo.claim(p.i, p.off)
		if p.v.k == kStack {
			*sl = stackSlot | uint32(p.v.n)
		} else {
			*sl = placedRow + 1
		}
	}
	b.charge(d.memo.takeAlloc())
	in.pos = c.p
	b.charge(payloadBytes)
	b.entryQ = append(b.entryQ, f.te)
	b.entriesLive++
	f.count++
	_ = d.pushScalar(kEntry, uint64(len(b.entryQ)-1)) // depth checked above
	return true
}

// fastMemo consumes a MEMOIZE, BINPUT or LONG_BINPUT that stores v, if one
// follows; false if the input ends or fastEntry cannot hold more stores.
func (d *decoder) fastMemo(c *cursor, v val) bool {
	var o byte
	if c.p < len(c.buf) && c.buf[c.p] != opFrame {
		o = c.buf[c.p]
	} else if p, ok := c.peek(); ok {
		o = p
	} else {
		return false
	}
	var i uint64
	switch o {
	case opMemoize:
		c.p++
		i = d.fast.next
	case opBinPut:
		if d.sym != nil {
			return false
		}
		c.p++
		p, ok := c.bytes(1)
		if !ok {
			return false
		}
		i = uint64(p[0])
	case opLongBinPut:
		if d.sym != nil {
			return false
		}
		c.p++
		p, ok := c.bytes(4)
		if !ok {
			return false
		}
		i = uint64(binary.LittleEndian.Uint32(p))
	default:
		return true
	}
	f := &d.fast
	if f.n == len(f.puts) {
		return false
	}
	f.puts[f.n] = fastPut{i: i, off: c.base + int64(c.p), v: v}
	f.n++
	if i >= f.next {
		f.next = i + 1
	}
	return true
}

// fastKey is fastRef for a key: a string with a trace-entry key code, or
// nil.
func (d *decoder) fastKey(c *cursor, o byte) *val {
	f := &d.fast
	if f.rewrites != d.memo.rewrites {
		f.keys, f.rewrites = [64]fastKey{}, d.memo.rewrites
	}
	i, ok := d.fastIndex(c, o)
	if !ok {
		return nil
	}
	k := &f.keys[i&63]
	if k.ok && k.i == i {
		return &k.v
	}
	v := d.memoRef(i)
	if v == nil || v.k != kStr || v.n == 0 {
		return nil
	}
	*k = fastKey{i: i, ok: true, v: *v}
	return &k.v
}

// fastRef reads a BINGET or LONG_BINGET argument and returns the live memo
// value it names (a kStack value for an interned frames list, in the
// decoder's scratch), or nil when the general way must decide.
func (d *decoder) fastRef(c *cursor, o byte) *val {
	if i, ok := d.fastIndex(c, o); ok {
		return d.memoRef(i)
	}
	return nil
}

// fastIndex consumes a BINGET or LONG_BINGET argument; false for an index
// this entry stores (not in the memo yet).
func (d *decoder) fastIndex(c *cursor, o byte) (uint64, bool) {
	i, ok := c.index(o)
	if !ok {
		return 0, false
	}
	f := &d.fast
	for j := range f.n {
		if f.puts[j].i == i {
			return 0, false
		}
	}
	return i, true
}

// memoRef returns the live memo value of index i, or nil (a helper of
// the parallel decode: a placeholder, symRef).
func (d *decoder) memoRef(i uint64) *val {
	if d.sym != nil {
		return d.symRef(i)
	}
	return d.memoRefLive(i)
}

// memoRefLive returns the live memo value of index i, or nil.
func (d *decoder) memoRefLive(i uint64) *val {
	sl := d.memo.slot(i)
	if sl == nil || *sl == 0 {
		return nil
	}
	if r := *sl; r&stackSlot != 0 {
		d.fastStack = val{k: kStack, n: uint64(r &^ stackSlot)}
		return &d.fastStack
	}
	row := d.memo.row(*sl - 1)
	if row.slot != uint32(i) || (row.v.k == kDict && row.v.d.gen != row.v.gen) {
		return nil
	}
	return &row.v
}

// fastValue reads the value of trace-entry key code into v.
func (d *decoder) fastValue(c *cursor, code uint64, v *val) bool {
	o, ok := c.op()
	if !ok {
		return false
	}
	switch o {
	case opNone:
		v.k = kNone
		return true
	case opBinInt1:
		p, ok := c.bytes(1)
		if ok {
			v.k, v.n = kInt, uint64(p[0])
		}
		return ok
	case opBinInt2:
		p, ok := c.bytes(2)
		if ok {
			v.k, v.n = kInt, uint64(binary.LittleEndian.Uint16(p))
		}
		return ok
	case opBinInt:
		p, ok := c.bytes(4)
		if ok {
			v.k, v.n = kInt, uint64(int64(int32(binary.LittleEndian.Uint32(p))))
		}
		return ok
	case opLong1:
		n, ok := c.bytes(1)
		if !ok {
			return false
		}
		p, ok := c.bytes(int(n[0]))
		if !ok {
			return false
		}
		k, u, err := longValue(p)
		v.k, v.n = k, u
		return err == nil
	case opNewTrue, opNewFalse:
		v.k, v.n = kBool, 0
		if o == opNewTrue {
			v.n = 1
		}
		return true
	case opBinGet, opLongBinGet:
		r := d.fastRef(c, o)
		if r == nil || (r.k != kStr && r.k != kStack) {
			return false
		}
		*v = *r
		return true
	case opShortBinUni:
		n, ok := c.bytes(1)
		if !ok {
			return false
		}
		p, ok := c.bytes(int(n[0]))
		if !ok || !utf8.Valid(p) {
			return false
		}
		s, kc := d.b.intern(p)
		*v = val{k: kStr, s: s, n: kc}
		return d.fastMemo(c, *v)
	case opEmptyList:
		if code != tkFrames {
			return false
		}
		return d.fastFrames(c, v)
	}
	return false
}

// fastFrames reads a frames list whose EMPTY_LIST was just read — empty,
// one frame (APPEND) or a MARK … APPENDS of frames already placed — into
// the scratch frame ids, and sets v to a kList marker; fastEntry interns
// it at commit, as the general way interns a list set under "frames".
func (d *decoder) fastFrames(c *cursor, v *val) bool {
	f := &d.fast
	put := f.n
	if !d.fastMemo(c, val{k: kStack}) {
		return false
	}
	if put < f.n {
		f.framePut = put
	}
	fids := f.fids[:0]
	o, ok := c.peek()
	if !ok {
		return false
	}
	switch o {
	case opMark:
		c.p++
		for {
			o, ok := c.op()
			if !ok {
				return false
			}
			if o == opAppends {
				break
			}
			if o != opBinGet && o != opLongBinGet {
				return false
			}
			id, ok := d.fastFrame(c, o)
			if !ok {
				return false
			}
			fids = append(fids, id)
		}
	case opBinGet, opLongBinGet:
		// One frame and APPEND, or the next key (the list is empty).
		at := c.p
		c.p++
		if id, ok := d.fastFrame(c, o); ok {
			if a, ok := c.op(); ok && a == opAppend {
				fids = append(fids, id)
				break
			}
			return false
		}
		c.p = at
	case opEmptyDict:
		return false // a frame seen for the first time
	}
	f.fids = fids
	*v = val{k: kList}
	return true
}

// fastFrame reads a reference to a frame dict already placed in a frames
// list and returns its frame id.
func (d *decoder) fastFrame(c *cursor, o byte) (uint32, bool) {
	r := d.fastRef(c, o)
	if r == nil || r.k != kDict || r.d.kind != dFrame || r.d.fid == 0 {
		return 0, false
	}
	return r.d.fid, true
}

// settle turns fast-decoded entries among vs into dict values, for every
// use but a trace list taking them.
func (b *builder) settle(vs []val) {
	for i := range vs {
		if vs[i].k == kEntry {
			vs[i] = b.materialize(vs[i])
		}
	}
}

// materialize makes a trace-entry dict of a kEntry value.
func (b *builder) materialize(v val) val {
	dv := b.newDict()
	_ = b.decide(dv.d, dTrace) // a new dict: no pairs wait
	*dv.d.te = b.entryQ[v.n]
	b.entryDone()
	return dv
}

// placeEntry puts the kEntry value n into trace list l.
func (b *builder) placeEntry(l *list, n uint64) {
	b.charge(entryBytes)
	b.keepEntry(l, &b.entryQ[n])
	b.entryDone()
}

// entryDone counts a kEntry value consumed; the queue restarts once none
// is left.
func (b *builder) entryDone() {
	b.entriesLive--
	if b.entriesLive == 0 {
		b.entryQ = b.entryQ[:0]
	}
}
