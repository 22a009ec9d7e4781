package replay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/npumon/npumon/internal/safefile"
)

// CheckComplete tells whether a snapshot file is completely written,
// without decoding it: a pickle's opcode stream is walked (each opcode's
// argument skipped by its length, each FRAME but one ending at the end of
// the file skipped whole: frames hold whole opcodes) and must end with
// STOP exactly at the end of the file; a JSON file must parse to a snapshot shape (a dict
// with "segments", or a list). A file cut anywhere — even right after a
// byte that happens to be STOP — fails. It never blocks on a FIFO or
// device named like a snapshot. Directory watchers call it before the
// full decode.
func CheckComplete(p string) error {
	f, err := safefile.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<16)
	head, err := r.Peek(2)
	if err != nil {
		return fmt.Errorf("%s: too short for a snapshot", p)
	}
	if head[0] == opProto {
		// The skim reads the file itself: it seeks past whole frames.
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if err := skimPickle(f, fi.Size()); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
	for {
		c, err := r.ReadByte()
		if err != nil || !isSpace(c) {
			if err != nil || (c != '{' && c != '[') {
				return fmt.Errorf("%s: neither a pickle nor JSON", p)
			}
			r.UnreadByte()
			break
		}
	}
	if err := checkJSON(r); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

// checkJSON scans a JSON document byte by byte, holding nothing of it (a
// file read whole would cost its size in memory; the full decode that
// follows validates every value): its brackets, outside strings, must
// close the one top-level object or array with only whitespace after
// it, and an object must have a top-level "segments" key.
func checkJSON(r *bufio.Reader) error {
	depth, top := 0, byte(0)
	inStr, esc, done := false, false, false
	var key [len("segments") + 1]byte
	n := 0            // bytes of the current top-level string kept in key
	maybeKey := false // a top-level string "segments" just closed
	segments := false // it was followed by ':'
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if done {
			if !isSpace(c) {
				return errors.New("data after the JSON value")
			}
			continue
		}
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				maybeKey = depth == 1 && top == '{' && n == len("segments") && string(key[:n]) == "segments"
				continue
			}
			if n < len(key) {
				key[n] = c
			}
			n++
			continue
		}
		switch c {
		case '"':
			inStr, n = true, 0
		case '{', '[':
			if depth == 0 {
				top = c
			}
			depth++
		case '}', ']':
			depth--
			done = depth == 0
		case ':':
			segments = segments || maybeKey
		}
		if !isSpace(c) && c != '"' {
			maybeKey = false
		}
	}
	if !done {
		return errors.New("unexpected end of JSON input")
	}
	if top == '{' && !segments {
		return errors.New("JSON without \"segments\": not a snapshot")
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// errIncomplete is a pickle whose opcode stream does not reach STOP at
// the end of the file.
var errIncomplete = errors.New("pickle does not end with STOP (still being written?)")

// skimPickle walks the opcodes of a pickle of size bytes from r without
// building anything. It reads through a buffer of its own, not byte by
// byte: replay runs it beside the full decode of a large file.
func skimPickle(r io.Reader, size int64) error {
	buf := make([]byte, 1<<20)
	var off int64 // file offset of buf[pos]
	pos, end := 0, 0
	eof := false
	// fill makes n bytes (n ≤ len(buf)) available at pos, unless the input ends.
	fill := func(n int) bool {
		if end-pos >= n {
			return true
		}
		copy(buf, buf[pos:end])
		end -= pos
		pos = 0
		for end < n && !eof {
			m, err := r.Read(buf[end:])
			end += m
			if err != nil {
				eof = true
			}
		}
		return end-pos >= n
	}
	skip := func(n int64) error {
		if n < 0 || n > size-off {
			return errIncomplete
		}
		if have := int64(end - pos); n <= have {
			pos += int(n)
			off += n
			return nil
		}
		rest := n - int64(end-pos)
		off += int64(end - pos)
		pos, end = 0, 0
		if sk, ok := r.(io.Seeker); ok {
			if _, err := sk.Seek(rest, io.SeekCurrent); err != nil {
				return errIncomplete
			}
		} else if m, err := io.CopyN(io.Discard, r, rest); err != nil || m != rest {
			return errIncomplete
		}
		off += rest
		return nil
	}
	// frame passes a FRAME's content without walking it, unless it ends
	// at the end of the file: then its opcodes must end with STOP there.
	// A pickle's frames hold whole opcodes (an unpickler refuses one that
	// runs past its frame), so the next opcode follows the frame.
	frame := func() error {
		if !fill(8) {
			return errIncomplete
		}
		n := binary.LittleEndian.Uint64(buf[pos : pos+8])
		pos += 8
		off += 8
		switch {
		case n > uint64(size-off):
			return errIncomplete
		case int64(n) == size-off:
			return nil // the last frame: walked
		}
		return skip(int64(n))
	}
	// lenArg reads a w-byte little-endian length and skips that many bytes.
	lenArg := func(w int) error {
		if !fill(w) {
			return errIncomplete
		}
		var b [8]byte
		copy(b[:], buf[pos:pos+w])
		pos += w
		off += int64(w)
		n := binary.LittleEndian.Uint64(b[:])
		if n > uint64(size) {
			return errIncomplete
		}
		return skip(int64(n))
	}
	for {
		if pos >= end && !fill(1) {
			return errIncomplete
		}
		op := buf[pos]
		pos++
		at := off
		off++
		var serr error
		switch op {
		case opStop:
			if off != size {
				return fmt.Errorf("offset %d: STOP with %d bytes after it", at, size-off)
			}
			return nil
		case opMark, opPop, opPopMark, opNone, opAppend, opAppends, opEmptyDict, opDict, opEmptyList, opList,
			opEmptyTuple, opTuple, opSetItem, opSetItems, opTuple1, opTuple2, opTuple3, opNewTrue, opNewFalse,
			opMemoize, 0x8f, 0x90, 0x91, '2':
		case opBinInt1, opBinGet, opBinPut, opProto:
			serr = skip(1)
		case opBinInt2:
			serr = skip(2)
		case opBinInt, opLongBinGet, opLongBinPut:
			serr = skip(4)
		case opBinFloat:
			serr = skip(8)
		case opFrame:
			serr = frame()
		case opShortBinString, opShortBinBytes, opShortBinUni, opLong1:
			serr = lenArg(1)
		case opBinString, opBinBytes, opBinUnicode, opLong4:
			serr = lenArg(4)
		case opBinUnicode8, opBinBytes8, opByteArray8:
			serr = lenArg(8)
		default:
			return fmt.Errorf("offset %d: opcode 0x%02x is not one a memory snapshot uses", at, op)
		}
		if serr != nil {
			return serr
		}
	}
}
