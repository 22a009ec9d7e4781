package replay

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
	"unsafe"

	"github.com/npumon/npumon/allocator/snapshot"
)

// This file is the pickle virtual machine: a purpose-built, non-executing
// interpreter for the plain-data subset of protocols 2–5. Containers are
// typed builders (builder.go) that turn into model values as they fill, so
// no generic object tree is ever built.

// Pickle opcodes the decoder handles.
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opBinFloat       = 'G'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opNone           = 'N'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opAppends        = 'e'
	opEmptyDict      = '}'
	opDict           = 'd'
	opEmptyList      = ']'
	opList           = 'l'
	opEmptyTuple     = ')'
	opTuple          = 't'
	opSetItem        = 's'
	opSetItems       = 'u'
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opShortBinString = 'U'
	opBinString      = 'T'
	opShortBinBytes  = 'C'
	opBinBytes       = 'B'
	opProto          = 0x80
	opTuple1         = 0x85
	opTuple2         = 0x86
	opTuple3         = 0x87
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	opLong1          = 0x8a
	opLong4          = 0x8b
	opShortBinUni    = 0x8c
	opBinUnicode8    = 0x8d
	opBinBytes8      = 0x8e
	opMemoize        = 0x94
	opFrame          = 0x95
	opByteArray8     = 0x96

	// Refused: they name or build Python objects.
	opGlobal      = 'c'
	opStackGlobal = 0x93
	opReduce      = 'R'
	opBuild       = 'b'
	opInst        = 'i'
	opObj         = 'o'
	opNewObj      = 0x81
	opNewObjEx    = 0x92
	opPersID      = 'P'
	opBinPersID   = 'Q'
	opExt1        = 0x82
	opExt2        = 0x83
	opExt4        = 0x84
	opNextBuffer  = 0x97
	opReadOnlyBuf = 0x98
)

// Limits that keep hostile input bounded.
const (
	maxStackDepth = 1 << 20
	maxMarkDepth  = 1 << 16
	maxMemo       = 1 << 28
	maxLongBytes  = 64
)

// kind is the type of a VM value.
type kind uint8

const (
	kNone kind = iota
	kBool
	kInt   // n holds an int64
	kUint  // n holds a uint64 above MaxInt64
	kFloat // n holds float64 bits
	kStr
	kBytes
	kPair // 2-tuple of ints: n, m
	kTuple
	kDict
	kList
	kMark
	kStack // a frames list already interned: n holds its StackID
	kEntry // a trace-entry dict fastEntry decoded: n indexes the builder's entry queue
)

var kindNames = [...]string{"None", "bool", "int", "int", "float", "str", "bytes", "tuple", "tuple", "dict", "list", "mark", "list", "dict"}

func (k kind) String() string { return kindNames[k] }

// val is one VM value. Dicts and lists carry their builder; gen guards
// against a recycled dict builder being reached through the memo.
type val struct {
	k   kind
	gen uint32 // beside k: the value is 56 bytes, not 64
	n   uint64
	m   uint64
	s   string
	d   *dict
	l   *list
}

// asList turns an interned frames list (kStack) back into a list value for
// the rare uses other than a "frames" key; the list is already interned, so
// it behaves as the original list did after interning.
func (v val) asList() val {
	if v.k != kStack {
		return v
	}
	return val{k: kList, l: &list{kind: lFrames, interned: true, stack: snapshot.StackID(v.n)}}
}

func (v val) int64() (int64, bool) {
	switch v.k {
	case kInt:
		return int64(v.n), true
	case kBool:
		return int64(v.n), true
	case kFloat:
		f := math.Float64frombits(v.n)
		if f == math.Trunc(f) && math.Abs(f) < 1<<62 {
			return int64(f), true
		}
	}
	return 0, false
}

func (v val) uint64() (uint64, bool) {
	switch v.k {
	case kInt, kUint:
		return v.n, true
	case kFloat:
		f := math.Float64frombits(v.n)
		if f == math.Trunc(f) && f >= 0 && f < 1<<63 {
			return uint64(f), true
		}
	}
	return 0, false
}

// decoder is the pickle VM plus the model it fills.
type decoder struct {
	in    *byteReader
	stack []val
	marks []int
	memo  memo
	b     *builder
	proto int
	op    byte  // current opcode
	opOff int64 // offset of the current opcode

	fast      fastState  // fastEntry's scratch
	fastStack val        // fastRef's answer for an interned frames list
	noFast    bool       // every entry the general way (tests compare the two)
	par       *parDecode // the parallel decode's helpers (pardecode.go); nil: none
	// A parallel decode's helper: memo references from symK up, and any
	// not copied, are placeholders (pardecode.go); nil: none.
	sym  *parSym
	symK uint64
	// A helper's: stack and MARK depth kept free for what encloses its
	// chunk in the decoder, so it fails where the decoder would (parSlack).
	slack int
}

// memo maps memo indexes to values. A snapshot memoizes every dict and
// list it writes (millions), so the table is kept compact: index slots are
// 4 bytes in fixed pages (growing never copies the table), and a slot holds
// either a row of the value table or, once a frames list has been interned,
// the list's stack id itself, so the list and its row are released. Rows are
// reused once released (placed trace-entry dicts, interned frames lists), so
// the rows kept follow the values still reachable, not the pickle's objects.
// A row remembers its slot: a stale slot (its dict already placed) is caught
// instead of reading another value.
//
// Both tables grow in fixed pages, never by copying, and every byte the memo
// allocates (pages, the page lists, the free list's growth) is added to
// alloc, which the decoder charges against its budget (takeAlloc): a pickle
// of nothing but MEMOIZE opcodes costs exactly what the budget says.
type memo struct {
	pages [][]uint32  // memo index → slot: 0 never stored; stackSlot|id; else 1 + row
	rows  [][]memoRow // row r is rows[r>>memoShift][r&(memoPage-1)]
	nrows uint32      // rows in use or free
	free  []uint32
	alloc int64  // bytes allocated and not yet charged
	count uint64 // MEMOIZE's next index
	// rewrites counts stores to an index that held a value: until it
	// changes, a string's index keeps naming that string (fastKey).
	rewrites uint64
	spare    [][]uint32 // index pages truncate gave up, for claim to reuse (the parallel decode's helpers)
}

// truncate empties the memo from index k on and its rows from row r on,
// keeping what was stored before (a parallel decode's helper keeps the
// values copied for it from chunk to chunk).
func (m *memo) truncate(k uint64, r uint32) {
	for p := k >> memoShift; p < uint64(len(m.pages)); p++ {
		if pg := m.pages[p]; pg != nil {
			if p == k>>memoShift && k&(memoPage-1) != 0 {
				clear(pg[k&(memoPage-1):])
			} else {
				// Given up, for the next stores to reuse: the pages kept
				// follow the indexes in use, not the highest one reached.
				clear(pg)
				m.spare = append(m.spare, pg)
				m.pages[p] = nil
			}
		}
	}
	for x := r; x < m.nrows; x++ {
		*m.row(x) = memoRow{}
	}
	m.nrows, m.free, m.alloc, m.count = r, m.free[:0], 0, k
}

type memoRow struct {
	v    val
	slot uint32
}

// memoRowBytes is the heap size of one row.
const memoRowBytes = int64(unsafe.Sizeof(memoRow{}))

// row returns row r (0-based).
func (m *memo) row(r uint32) *memoRow { return &m.rows[r>>memoShift][r&(memoPage-1)] }

// newRow returns a fresh row's index, allocating its page when needed.
func (m *memo) newRow() uint32 {
	r := m.nrows
	if r&(memoPage-1) == 0 && int(r>>memoShift) == len(m.rows) {
		if len(m.rows) == cap(m.rows) {
			m.alloc += int64(2*cap(m.rows)+1) * 24 // append's new array of page headers
		}
		m.rows = append(m.rows, make([]memoRow, memoPage))
		m.alloc += memoPage * memoRowBytes
	}
	m.nrows++
	return r
}

// takeAlloc returns the bytes allocated since the last call.
func (m *memo) takeAlloc() int64 {
	n := m.alloc
	m.alloc = 0
	return n
}

const (
	freeRow   = ^uint32(0)
	memoShift = 14 // 16 Ki slots (64 KiB) per page
	memoPage  = 1 << memoShift
	stackSlot = 1 << 31 // slot holds an interned frames list's StackID
)

// slot returns index i's slot, nil when its page does not exist.
func (m *memo) slot(i uint64) *uint32 {
	if p := i >> memoShift; p < uint64(len(m.pages)) && m.pages[p] != nil {
		return &m.pages[p][i&(memoPage-1)]
	}
	return nil
}

func (m *memo) put(i uint64, v val, limit int64) error {
	sl, err := m.claim(i, limit)
	if err != nil {
		return err
	}
	var row uint32
	if n := len(m.free); n > 0 {
		row = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		row = m.newRow()
	}
	*m.row(row) = memoRow{v: v, slot: uint32(i)}
	*sl = row + 1
	switch v.k {
	case kDict:
		v.d.memoRow = row + 1
	case kList:
		v.l.memoRow = row + 1
	}
	return nil
}

// claim checks memo index i and returns its slot, creating its page and
// releasing the row the slot held; the caller writes the slot.
func (m *memo) claim(i uint64, limit int64) (*uint32, error) {
	if i >= maxMemo || int64(i) > limit {
		return nil, fmt.Errorf("memo index %d out of range", i)
	}
	if i >= m.count {
		m.count = i + 1
	}
	sl := &m.page(i >> memoShift)[i&(memoPage-1)]
	if r := *sl; r != 0 {
		m.rewrites++
		if r&stackSlot == 0 && m.row(r-1).slot == uint32(i) {
			m.release(r)
		}
	}
	return sl, nil
}

// page returns index page p, creating it (and the pages before it).
func (m *memo) page(p uint64) []uint32 {
	for uint64(len(m.pages)) <= p {
		if len(m.pages) == cap(m.pages) {
			m.alloc += int64(2*cap(m.pages)+1) * 24 // append's new array of page headers
		}
		m.pages = append(m.pages, nil)
	}
	if m.pages[p] == nil {
		if n := len(m.spare); n > 0 {
			m.pages[p], m.spare = m.spare[n-1], m.spare[:n-1]
		} else {
			m.pages[p] = make([]uint32, memoPage)
			m.alloc += 4 * memoPage
		}
	}
	return m.pages[p]
}

// placedRow is the row every slot of an already placed trace entry points
// to (fastEntry): its slot never matches, so a later reference fails as a
// reference to a placed dict does.
const placedRow = 0

// newMemo returns an empty memo holding only placedRow.
func newMemo() memo {
	var m memo
	*m.row(m.newRow()) = memoRow{slot: freeRow} // placedRow
	return m
}

// release frees a row (1-based); its slot goes stale.
func (m *memo) release(r uint32) {
	*m.row(r - 1) = memoRow{slot: freeRow}
	if len(m.free) == cap(m.free) {
		m.alloc += 4 * int64(2*cap(m.free)+1) // append's new array; the old lives until copied
	}
	m.free = append(m.free, r-1)
}

// interned replaces the memo row of frames list l, now interned, with its
// stack id: later references get the id, and the list is no longer kept.
func (m *memo) interned(l *list) {
	r := l.memoRow
	l.memoRow = 0
	if r == 0 || m.row(r-1).v.l != l {
		return
	}
	i := uint64(m.row(r - 1).slot)
	if sl := m.slot(i); sl != nil && *sl == r {
		*sl = stackSlot | uint32(l.stack)
	}
	m.release(r)
}

func (m *memo) get(i uint64) (val, error) {
	sl := m.slot(i)
	if sl == nil || *sl == 0 {
		return val{}, fmt.Errorf("memo index %d was never stored", i)
	}
	if r := *sl; r&stackSlot != 0 {
		return val{k: kStack, n: uint64(r &^ stackSlot)}, nil
	}
	row := m.row(*sl - 1)
	if row.slot != uint32(i) || (row.v.k == kDict && row.v.d.gen != row.v.gen) {
		return val{}, fmt.Errorf("memo index %d refers to a dict that was already placed in its list; shared entries are not a memory snapshot shape", i)
	}
	return row.v, nil
}

// get pushes memo entry i (BINGET, LONG_BINGET: the most frequent opcodes).
func (d *decoder) get(i uint64) error {
	if d.sym != nil {
		return d.symGet(i)
	}
	// Fast path: a live row, copied straight onto the stack.
	if sl := d.memo.slot(i); sl != nil && *sl != 0 && *sl&stackSlot == 0 && len(d.stack)+d.slack < maxStackDepth {
		row := d.memo.row(*sl - 1)
		if row.slot == uint32(i) && (row.v.k != kDict || row.v.d.gen == row.v.gen) {
			row.v.copyTo(d.grow())
			return nil
		}
	}
	v, err := d.memo.get(i)
	if err != nil {
		return err
	}
	if len(d.stack)+d.slack >= maxStackDepth {
		return fmt.Errorf("stack deeper than %d values", maxStackDepth)
	}
	d.stack = append(d.stack, v)
	return nil
}

func (d *decoder) push(v val) error {
	if len(d.stack)+d.slack >= maxStackDepth {
		return fmt.Errorf("stack deeper than %d values", maxStackDepth)
	}
	d.stack = append(d.stack, v)
	return nil
}

// grow adds a slot on top of the stack and returns it; its fields are
// stale until the caller writes all of them. The caller checks the depth.
func (d *decoder) grow() *val {
	n := len(d.stack)
	if n == cap(d.stack) {
		d.stack = append(d.stack, val{})
	} else {
		d.stack = d.stack[:n+1]
	}
	return &d.stack[n]
}

// pushScalar pushes a value without strings or builders (ints, floats,
// None, bools). Writing the fields one by one into the slot avoids the
// stack temporary a val literal goes through: copying that temporary with
// overlapping 16-byte moves stalls on store forwarding, and BINGET and the
// integer opcodes are most of a snapshot's opcodes.
func (d *decoder) pushScalar(k kind, n uint64) error {
	if len(d.stack)+d.slack >= maxStackDepth {
		return fmt.Errorf("stack deeper than %d values", maxStackDepth)
	}
	v := d.grow()
	v.k, v.gen, v.n, v.m = k, 0, n, 0
	if v.s != "" {
		v.s = ""
	}
	if v.d != nil {
		v.d = nil
	}
	if v.l != nil {
		v.l = nil
	}
	return nil
}

// pushRef pushes a string, dict or list value (see pushScalar).
func (d *decoder) pushRef(k kind, gen uint32, str string, dd *dict, l *list) error {
	if len(d.stack)+d.slack >= maxStackDepth {
		return fmt.Errorf("stack deeper than %d values", maxStackDepth)
	}
	v := d.grow()
	v.k, v.gen, v.n, v.m = k, gen, 0, 0
	v.s, v.d, v.l = str, dd, l
	return nil
}

// copyTo writes v into dst field by field (see pushScalar).
func (v *val) copyTo(dst *val) {
	dst.k, dst.gen, dst.n, dst.m = v.k, v.gen, v.n, v.m
	dst.s, dst.d, dst.l = v.s, v.d, v.l
}

func (d *decoder) pop() (val, error) {
	n := len(d.stack)
	if n == 0 || d.stack[n-1].k == kMark {
		return val{}, fmt.Errorf("opcode 0x%02x: stack underflow", d.op)
	}
	v := d.stack[n-1]
	d.stack = d.stack[:n-1]
	return v, nil
}

func (d *decoder) top() (*val, error) {
	n := len(d.stack)
	if n == 0 || d.stack[n-1].k == kMark {
		return nil, fmt.Errorf("opcode 0x%02x: stack underflow", d.op)
	}
	t := &d.stack[n-1]
	if t.k == kEntry {
		*t = d.b.materialize(*t) // to be stored, or changed: a dict of its own
	}
	return t, nil
}

// popMark returns the values above the newest mark and removes them and the mark.
func (d *decoder) popMark() ([]val, error) {
	if len(d.marks) == 0 {
		return nil, fmt.Errorf("opcode 0x%02x without a MARK", d.op)
	}
	k := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[k+1:]
	d.stack = d.stack[:k]
	return items, nil
}

// run interprets opcodes until STOP and returns the top value. It is the
// hot loop of every decode: the opcodes a snapshot is made of (memo gets
// and puts, integers, strings, empty containers, MARK, SETITEMS, APPENDS)
// are handled inline; the rare ones (the protocol header, STOP, POP, LONG4,
// tuples, LIST and DICT, APPEND, SETITEM, the refused opcodes) are methods
// below, so the loop stays short without an indirection per opcode.
func (d *decoder) run() (val, error) {
	in := d.in
	for {
		d.opOff = in.offset()
		var op byte
		var err error
		if in.pos < in.end {
			op = in.buf[in.pos]
			in.pos++
		} else if op, err = in.byte(); err != nil {
			return val{}, err
		}
		d.op = op
		switch op {
		case opProto:
			err = d.protocol()
		case opFrame:
			// Framing is only a read-ahead hint; the stream is read as it comes.
			_, err = in.next(8)
		case opStop:
			return d.stop()
		case opMark:
			if d.par != nil && d.parMark() {
				continue // a run the helper decoded: the reader is past it
			}
			if len(d.marks)+d.slack >= maxMarkDepth {
				return val{}, fmt.Errorf("more than %d nested MARKs", maxMarkDepth)
			}
			d.marks = append(d.marks, len(d.stack))
			err = d.pushScalar(kMark, 0)
		case opPop:
			err = d.popOp()
		case opPopMark:
			err = d.popMarkOp()
		case opNone:
			err = d.pushScalar(kNone, 0)
		case opNewTrue:
			err = d.pushScalar(kBool, 1)
		case opNewFalse:
			err = d.pushScalar(kBool, 0)
		case opBinInt1:
			var c byte
			if c, err = in.byte(); err == nil {
				err = d.pushScalar(kInt, uint64(c))
			}
		case opBinInt2:
			var p []byte
			if p, err = in.next(2); err == nil {
				err = d.pushScalar(kInt, uint64(binary.LittleEndian.Uint16(p)))
			}
		case opBinInt:
			var p []byte
			if p, err = in.next(4); err == nil {
				err = d.pushScalar(kInt, uint64(int64(int32(binary.LittleEndian.Uint32(p)))))
			}
		case opLong1:
			var c byte
			if c, err = in.byte(); err == nil {
				err = d.long(int(c))
			}
		case opLong4:
			err = d.long4()
		case opBinFloat:
			var p []byte
			if p, err = in.next(8); err == nil {
				err = d.pushScalar(kFloat, binary.BigEndian.Uint64(p))
			}
		case opShortBinUni, opShortBinString, opShortBinBytes:
			var c byte
			if c, err = in.byte(); err == nil {
				err = d.str(uint64(c), op != opShortBinBytes)
			}
		case opBinUnicode, opBinString, opBinBytes:
			var p []byte
			if p, err = in.next(4); err == nil {
				err = d.str(uint64(binary.LittleEndian.Uint32(p)), op != opBinBytes)
			}
		case opBinUnicode8, opBinBytes8, opByteArray8:
			var p []byte
			if p, err = in.next(8); err == nil {
				err = d.str(binary.LittleEndian.Uint64(p), op == opBinUnicode8)
			}
		case opEmptyDict:
			if l := d.batchList(); l != nil && d.fastEntry(l) {
				break
			}
			dv := d.b.newDict()
			err = d.pushRef(kDict, dv.gen, "", dv.d, nil)
		case opEmptyList:
			err = d.pushRef(kList, 0, "", nil, d.b.newList())
		case opEmptyTuple:
			err = d.pushScalar(kTuple, 0)
		case opTuple1, opTuple2, opTuple3:
			err = d.tupleN(int(op-opTuple1) + 1)
		case opTuple:
			err = d.tuple()
		case opList:
			err = d.listOp()
		case opDict:
			err = d.dictOp()
		case opAppend:
			err = d.appendOp()
		case opAppends:
			var items []val
			if items, err = d.popMark(); err == nil {
				var t *val
				if t, err = d.listTop(); err == nil {
					err = d.b.appendItems(t.l, items)
				}
			}
			if d.sym != nil && err == nil && len(d.marks) == 0 && d.symListEnd() {
				return val{}, errListEnd
			}
		case opSetItem:
			err = d.setItem()
		case opSetItems:
			var items []val
			if items, err = d.popMark(); err == nil {
				d.b.settle(items)
				var t *val
				if t, err = d.top(); err == nil {
					if t.k != kDict {
						return val{}, fmt.Errorf("SETITEMS on a %s", t.k)
					}
					err = d.b.setItems(*t, items)
				}
			}
		case opMemoize:
			var t *val
			if t, err = d.top(); err == nil {
				err = d.memoPut(d.memo.count, *t)
			}
		case opBinPut:
			if d.sym != nil {
				return val{}, errSymPut
			}
			var c byte
			if c, err = in.byte(); err == nil {
				var t *val
				if t, err = d.top(); err == nil {
					err = d.memoPut(uint64(c), *t)
				}
			}
		case opLongBinPut:
			if d.sym != nil {
				return val{}, errSymPut
			}
			var p []byte
			if p, err = in.next(4); err == nil {
				var t *val
				if t, err = d.top(); err == nil {
					err = d.memoPut(uint64(binary.LittleEndian.Uint32(p)), *t)
				}
			}
		case opBinGet:
			var c byte
			if c, err = in.byte(); err == nil {
				err = d.get(uint64(c))
			}
		case opLongBinGet:
			var p []byte
			if p, err = in.next(4); err == nil {
				err = d.get(uint64(binary.LittleEndian.Uint32(p)))
			}
		default:
			return val{}, d.refuse(op)
		}
		if err == nil {
			err = d.b.overErr
		}
		if err != nil {
			return val{}, err
		}
	}
}

// protocol reads PROTO's argument: 2–5 are decoded.
func (d *decoder) protocol() error {
	c, err := d.in.byte()
	if err != nil {
		return err
	}
	if c < 2 || c > 5 {
		return fmt.Errorf("pickle protocol %d is not supported (2–5 are)", c)
	}
	d.proto = int(c)
	return nil
}

// stop is STOP: the top value is the pickle's.
func (d *decoder) stop() (val, error) {
	v, err := d.pop()
	if err != nil {
		return val{}, fmt.Errorf("STOP with an empty stack")
	}
	if v.k == kEntry {
		v = d.b.materialize(v)
	}
	return v, nil
}

// popOp is POP: the top value (or a MARK) is dropped; a trace entry still
// queued is placed first.
func (d *decoder) popOp() error {
	if n := len(d.stack); n > 0 && d.stack[n-1].k == kMark {
		d.marks = d.marks[:len(d.marks)-1]
		d.stack = d.stack[:n-1]
		return nil
	}
	v, err := d.pop()
	if err != nil {
		return err
	}
	if v.k == kEntry {
		d.b.materialize(v)
	}
	return nil
}

// popMarkOp is POP_MARK: the values above the newest mark are dropped.
func (d *decoder) popMarkOp() error {
	items, err := d.popMark()
	if err != nil {
		return err
	}
	d.b.settle(items)
	return nil
}

// long4 is LONG4: an integer of a 4-byte length, bounded.
func (d *decoder) long4() error {
	p, err := d.in.next(4)
	if err != nil {
		return err
	}
	n := int32(binary.LittleEndian.Uint32(p))
	if n < 0 || n > maxLongBytes {
		return fmt.Errorf("LONG4 of %d bytes: integer too large for a memory snapshot", n)
	}
	return d.long(int(n))
}

// tupleN is TUPLE1, TUPLE2 and TUPLE3: the top n values become a tuple.
func (d *decoder) tupleN(n int) error {
	if len(d.stack) < n {
		return fmt.Errorf("TUPLE%d: stack underflow", n)
	}
	items := d.stack[len(d.stack)-n:]
	for _, it := range items {
		if it.k == kMark {
			return fmt.Errorf("TUPLE%d: stack underflow", n)
		}
	}
	d.b.settle(items)
	t := tupleOf(items)
	d.stack = d.stack[:len(d.stack)-n]
	return d.push(t)
}

// tuple is TUPLE: the values above the newest mark become a tuple.
func (d *decoder) tuple() error {
	items, err := d.popMark()
	if err != nil {
		return err
	}
	d.b.settle(items)
	return d.push(tupleOf(items))
}

// listOp is LIST: the values above the newest mark become a list.
func (d *decoder) listOp() error {
	items, err := d.popMark()
	if err != nil {
		return err
	}
	l := d.b.newList()
	if err := d.b.appendItems(l, items); err != nil {
		return err
	}
	return d.push(val{k: kList, l: l})
}

// dictOp is DICT: the key, value pairs above the newest mark become a dict.
func (d *decoder) dictOp() error {
	items, err := d.popMark()
	if err != nil {
		return err
	}
	d.b.settle(items)
	dv := d.b.newDict()
	if err := d.b.setItems(dv, items); err != nil {
		return err
	}
	return d.push(dv)
}

// listTop is the list APPEND and APPENDS add to: the top value, an
// interned frames list turned back into a list.
func (d *decoder) listTop() (*val, error) {
	t, err := d.top()
	if err != nil {
		return nil, err
	}
	if t.k == kStack {
		*t = t.asList()
	}
	if t.k != kList {
		if d.op == opAppend {
			return nil, fmt.Errorf("APPEND to a %s", t.k)
		}
		return nil, fmt.Errorf("APPENDS to a %s", t.k)
	}
	return t, nil
}

// appendOp is APPEND: the top value is added to the list below it.
func (d *decoder) appendOp() error {
	v, err := d.pop()
	if err != nil {
		return err
	}
	t, err := d.listTop()
	if err != nil {
		return err
	}
	return d.b.appendItems(t.l, []val{v})
}

// setItem is SETITEM: the top key and value are set in the dict below them.
func (d *decoder) setItem() error {
	if len(d.stack) < 3 {
		return fmt.Errorf("SETITEM: stack underflow")
	}
	items := d.stack[len(d.stack)-2:]
	if items[0].k == kMark || items[1].k == kMark {
		return fmt.Errorf("SETITEM: stack underflow")
	}
	d.b.settle(items)
	kv := [2]val{items[0], items[1]}
	d.stack = d.stack[:len(d.stack)-2]
	t, err := d.top()
	if err != nil {
		return err
	}
	if t.k != kDict {
		return fmt.Errorf("SETITEM on a %s", t.k)
	}
	return d.b.setItems(*t, kv[:])
}

// refuse is the error of an opcode run does not decode: those that name or
// build Python objects (a memory snapshot has none), and those that are not
// pickle protocol 2–5 plain data at all.
func (d *decoder) refuse(op byte) error {
	switch op {
	case opGlobal, opInst:
		mod, _ := d.line()
		name, _ := d.line()
		return notSnapshot(mod + "." + name)
	case opStackGlobal:
		name, mod := "?", "?"
		if n := len(d.stack); n >= 2 && d.stack[n-1].k == kStr && d.stack[n-2].k == kStr {
			mod, name = d.stack[n-2].s, d.stack[n-1].s
		}
		return notSnapshot(mod + "." + name)
	case opReduce, opBuild, opObj, opNewObj, opNewObjEx, opPersID, opBinPersID,
		opExt1, opExt2, opExt4, opNextBuffer, opReadOnlyBuf:
		return fmt.Errorf("%w: the pickle builds Python objects (opcode 0x%02x)", ErrNotSnapshot, op)
	}
	return fmt.Errorf("opcode 0x%02x is not part of a memory snapshot pickle (protocol 2–5 plain data)", op)
}

func notSnapshot(class string) error {
	return fmt.Errorf("%w: the pickle references Python class %s", ErrNotSnapshot, class)
}

// line reads a newline-terminated argument (GLOBAL, INST), capped.
func (d *decoder) line() (string, error) {
	var out []byte
	for len(out) < 256 {
		c, err := d.in.byte()
		if err != nil {
			return string(out), err
		}
		if c == '\n' {
			break
		}
		out = append(out, c)
	}
	return string(out), nil
}

func (d *decoder) memoPut(i uint64, v val) error {
	// A memo index can never exceed the number of bytes read so far.
	err := d.memo.put(i, v, d.in.offset())
	d.b.charge(d.memo.takeAlloc())
	return err
}

// long decodes an n-byte little-endian two's-complement integer.
func (d *decoder) long(n int) error {
	p, err := d.in.next(n)
	if err != nil {
		return err
	}
	k, u, err := longValue(p)
	if err != nil {
		return err
	}
	return d.pushScalar(k, u)
}

// longValue is the integer of LONG1/LONG4's bytes p: kInt (int64 bits) or,
// above MaxInt64, kUint.
func longValue(p []byte) (kind, uint64, error) {
	n := len(p)
	if n == 0 {
		return kInt, 0, nil
	}
	neg := p[n-1]&0x80 != 0
	// Strip sign-extension bytes, then the value must fit 64 bits.
	sig := n
	for sig > 1 {
		if !neg && p[sig-1] == 0 || neg && p[sig-1] == 0xff {
			sig--
			continue
		}
		break
	}
	if sig > 8 || (neg && sig == 8 && p[7]&0x80 == 0) {
		return 0, 0, fmt.Errorf("integer of %d bytes does not fit 64 bits", n)
	}
	var u uint64
	for i := sig - 1; i >= 0; i-- {
		u = u<<8 | uint64(p[i])
	}
	if neg {
		if sig < 8 {
			u |= ^uint64(0) << (8 * sig)
		}
		return kInt, u, nil
	}
	if u > math.MaxInt64 {
		return kUint, u, nil
	}
	return kInt, u, nil
}

// str reads a string (or byte string) of n bytes.
func (d *decoder) str(n uint64, text bool) error {
	ln, err := d.in.checkLen(n, "string")
	if err != nil {
		return err
	}
	p, err := d.in.next(ln)
	if err != nil {
		return err
	}
	if !text {
		return d.pushScalar(kBytes, uint64(ln))
	}
	if d.op == opShortBinUni || d.op == opBinUnicode || d.op == opBinUnicode8 {
		if !utf8.Valid(p) {
			return fmt.Errorf("string is not valid UTF-8")
		}
	}
	is, code := d.b.intern(p)
	if err := d.pushRef(kStr, 0, is, nil, nil); err != nil {
		return err
	}
	d.stack[len(d.stack)-1].n = code
	return nil
}

// tupleOf packs items into a tuple value. 2-tuples of ints (pool ids) are
// the only tuples a snapshot has; other tuples keep no content.
func tupleOf(items []val) val {
	if len(items) == 2 && (items[0].k == kInt || items[0].k == kUint) && (items[1].k == kInt || items[1].k == kUint) {
		return val{k: kPair, n: items[0].n, m: items[1].n}
	}
	return val{k: kTuple}
}

// decodePickle decodes a whole pickle stream into a snapshot.
func decodePickle(in *byteReader, b *builder) (*snapshot.Snapshot, string, error) {
	d := &decoder{in: in, b: b, memo: newMemo()}
	d.b.memo = &d.memo
	if b.par != nil {
		d.par = newParDecode(b.par.ra, b.par.size, b.limit)
		defer d.par.close()
	}
	top, err := d.run()
	if err != nil {
		return nil, "", offsetError(d.opOff, err)
	}
	snap, schema, err := d.b.finish(top)
	if err != nil {
		return nil, "", err
	}
	return snap, schema, nil
}
