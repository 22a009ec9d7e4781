package replay

import (
	"encoding/binary"
	"errors"
	"io"
)

// The pre-scan of the parallel decode (pardecode.go): it walks a pickle's
// opcodes without building values and reports the batches of a big list
// — the runs of MARK … APPENDS that follow one another, as a pickler
// writes a list of more than 1,000 items, i.e. a device trace — with the
// memo counts at their ends (protocol 4 numbers memo slots by counting
// MEMOIZEs) and the memo indexes each batch reads that were stored before
// it began. It keeps no value and no stack, only the MARKs: what it
// reports is a plan, which the decoders check (pardecode.go), never an
// answer.

// scanBatch is one continuation batch of a big list: a MARK right after
// the APPENDS of the batch before it, up to and including its own APPENDS.
type scanBatch struct {
	mark, end int64  // offset of its MARK; offset after its APPENDS
	c0, c1    uint64 // memo counts at mark and at end
	follows   bool   // the APPENDS just before its MARK ended the batch scanned before it
	tracked   bool   // refs were collected (the batch began at or after trackFrom)
	refs      []uint64
	maxRef    uint64 // the largest of refs (0 when none)
}

// errScanShape stops a scan at an opcode the plan does not cover (a memo
// store by index, an opcode outside plain data): the decode goes on
// sequentially from there.
var errScanShape = errors.New("pre-scan: not a shape the parallel decode plans for")

type scanner struct {
	r    io.ReaderAt
	size int64
	buf  []byte
	base int64 // file offset of buf[0]
	pos  int
	end  int

	count      uint64
	marks      []int64
	prevAppend bool // the last opcode (FRAMEs aside) was APPENDS
	prevDepth  int  // len(marks) after it
	prevBatch  bool // and it ended the batch last reported
	open       *scanBatch
	openDepth  int
	seen       [1024]uint64 // recent refs of the open batch (index+1), to keep refs short
	err        error        // why scanning stopped: nil at STOP
	// trackFrom is the offset from which batches collect their refs: the
	// helper sets it past the stretch the decoder will decode itself.
	trackFrom int64
	done      bool
}

func newScanner(r io.ReaderAt, size int64) *scanner {
	return &scanner{r: r, size: size, buf: make([]byte, 1<<20)}
}

// need makes n bytes available at pos; false at the end of the input.
func (s *scanner) need(n int) bool {
	if s.end-s.pos >= n {
		return true
	}
	copy(s.buf, s.buf[s.pos:s.end])
	s.base += int64(s.pos)
	s.end -= s.pos
	s.pos = 0
	if n > len(s.buf) {
		return false
	}
	for s.end < n {
		m, err := s.r.ReadAt(s.buf[s.end:], s.base+int64(s.end))
		s.end += m
		if m == 0 || err != nil && s.end < n {
			return false
		}
	}
	return true
}

// skip passes n bytes (a string's), reading none of them.
func (s *scanner) skip(n uint64) bool {
	if n <= uint64(s.end-s.pos) {
		s.pos += int(n)
		return true
	}
	off := s.base + int64(s.pos)
	if n > uint64(s.size-off) {
		return false
	}
	s.base, s.pos, s.end = off+int64(n), 0, 0
	return true
}

// arg returns the next n bytes (n ≤ 8).
func (s *scanner) arg(n int) ([]byte, bool) {
	if !s.need(n) {
		return nil, false
	}
	p := s.buf[s.pos : s.pos+n]
	s.pos += n
	return p, true
}

// next scans to the end of the next continuation batch and returns it, or
// nil once the scan has stopped (s.err says why).
func (s *scanner) next() *scanBatch {
	for !s.done {
		if b, ok := s.fast(); ok {
			return b
		}
		if !s.need(1) {
			s.stop(ErrTruncated)
			return nil
		}
		off := s.base + int64(s.pos)
		op := s.buf[s.pos]
		s.pos++
		appended := false
		var n uint64 // string length to skip
		ok := true
		switch op {
		case opFrame:
			_, ok = s.arg(8)
			if ok {
				continue // FRAME keeps prevAppend as it is
			}
		case opProto, opBinInt1:
			_, ok = s.arg(1)
		case opBinInt2:
			_, ok = s.arg(2)
		case opBinInt:
			_, ok = s.arg(4)
		case opBinFloat:
			_, ok = s.arg(8)
		case opLong1, opShortBinUni, opShortBinString, opShortBinBytes:
			var p []byte
			if p, ok = s.arg(1); ok {
				n = uint64(p[0])
			}
		case opLong4, opBinUnicode, opBinString, opBinBytes:
			var p []byte
			if p, ok = s.arg(4); ok {
				n = uint64(binary.LittleEndian.Uint32(p))
				if op == opLong4 && n > maxLongBytes {
					ok = false
				}
			}
		case opBinUnicode8, opBinBytes8, opByteArray8:
			var p []byte
			if p, ok = s.arg(8); ok {
				n = binary.LittleEndian.Uint64(p)
			}
		case opNone, opNewTrue, opNewFalse, opEmptyDict, opEmptyList, opEmptyTuple,
			opTuple1, opTuple2, opTuple3, opAppend, opSetItem, opPop:
		case opMark:
			s.mark(off)
		case opTuple, opList, opDict, opSetItems, opPopMark:
			ok = s.popMark()
		case opAppends:
			if ok = s.popMark(); ok {
				appended = true
				if b := s.open; b != nil && len(s.marks) == s.openDepth {
					s.open = nil
					b.end, b.c1 = s.base+int64(s.pos), s.count
					s.prevAppend, s.prevDepth, s.prevBatch = true, len(s.marks), true
					return b
				}
			}
		case opMemoize:
			s.count++
		case opBinGet, opLongBinGet:
			var p []byte
			if op == opBinGet {
				if p, ok = s.arg(1); ok {
					s.ref(uint64(p[0]))
				}
			} else if p, ok = s.arg(4); ok {
				s.ref(uint64(binary.LittleEndian.Uint32(p)))
			}
		case opStop:
			s.stop(nil)
			return nil
		default:
			s.stop(errScanShape) // BINPUT, LONG_BINPUT and everything refused
			return nil
		}
		if ok && n > 0 {
			ok = s.skip(n)
		}
		if !ok {
			s.stop(ErrTruncated)
			return nil
		}
		s.prevAppend, s.prevBatch = appended, false
		if appended {
			s.prevDepth = len(s.marks)
		}
	}
	return nil
}

func (s *scanner) stop(err error) {
	s.done, s.err, s.open = true, err, nil
}

// mark is MARK at off: a batch begins when it follows an APPENDS at the
// same depth and no batch is open.
func (s *scanner) mark(off int64) {
	if s.open == nil && s.prevAppend && s.prevDepth == len(s.marks) {
		s.open = &scanBatch{mark: off, c0: s.count, follows: s.prevBatch, tracked: off >= s.trackFrom}
		s.openDepth = len(s.marks)
		if s.open.tracked {
			clear(s.seen[:])
		}
	}
	s.marks = append(s.marks, off)
}

func (s *scanner) popMark() bool {
	if len(s.marks) == 0 {
		return false
	}
	s.marks = s.marks[:len(s.marks)-1]
	if s.open != nil && len(s.marks) < s.openDepth {
		s.open = nil // the batch's MARK was taken by something else
	}
	return true
}

// ref notes a memo read of the open batch that reaches before it.
func (s *scanner) ref(i uint64) {
	b := s.open
	if b == nil || i >= b.c0 || !b.tracked {
		return
	}
	h := &s.seen[i&uint64(len(s.seen)-1)]
	if *h == i+1 {
		return
	}
	*h = i + 1
	b.refs = append(b.refs, i)
	b.maxRef = max(b.maxRef, i)
}

// fast scans the opcodes a trace is made of while the buffer holds at
// least the longest of their arguments, as next does; it stops at any
// other opcode (next scans that one), returning a batch as next would.
func (s *scanner) fast() (*scanBatch, bool) {
	buf := s.buf[:s.end]
	p := s.pos
	defer func() { s.pos = p }()
	for p+16 <= len(buf) {
		op := buf[p]
		appended := false
		switch op {
		case opBinGet:
			if s.open != nil {
				s.ref(uint64(buf[p+1]))
			}
			p += 2
		case opLongBinGet:
			if s.open != nil {
				s.ref(uint64(binary.LittleEndian.Uint32(buf[p+1:])))
			}
			p += 5
		case opMemoize:
			s.count++
			p++
		case opMark:
			s.mark(s.base + int64(p))
			p++
		case opEmptyDict, opEmptyList, opNone, opNewTrue, opNewFalse, opAppend, opEmptyTuple, opTuple2:
			p++
		case opBinInt1:
			p += 2
		case opBinInt2:
			p += 3
		case opBinInt:
			p += 5
		case opBinFloat:
			p += 9
		case opFrame:
			p += 9
			continue // FRAME keeps prevAppend as it is
		case opShortBinUni, opShortBinString, opShortBinBytes, opLong1:
			n := int(buf[p+1])
			if p+2+n > len(buf) || op == opLong1 && n > maxLongBytes {
				return nil, false
			}
			p += 2 + n
		case opBinUnicode, opBinString, opBinBytes:
			n := int64(binary.LittleEndian.Uint32(buf[p+1:]))
			if int64(p)+5+n > int64(len(buf)) {
				return nil, false
			}
			p += 5 + int(n)
		case opSetItems:
			if len(s.marks) == 0 {
				return nil, false
			}
			s.marks = s.marks[:len(s.marks)-1]
			if s.open != nil && len(s.marks) < s.openDepth {
				s.open = nil
			}
			p++
		case opAppends:
			if len(s.marks) == 0 {
				return nil, false
			}
			s.marks = s.marks[:len(s.marks)-1]
			p++
			appended = true
			if b := s.open; b != nil && len(s.marks) == s.openDepth {
				s.open = nil
				b.end, b.c1 = s.base+int64(p), s.count
				s.prevAppend, s.prevDepth, s.prevBatch = true, len(s.marks), true
				return b, true
			}
			if s.open != nil && len(s.marks) < s.openDepth {
				s.open = nil
			}
		default:
			return nil, false
		}
		s.prevAppend, s.prevBatch = appended, false
		if appended {
			s.prevDepth = len(s.marks)
		}
	}
	return nil, false
}
