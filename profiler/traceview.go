package profiler

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/npumon/npumon/internal/safefile"
)

// Streaming trace_view.json reader (docs/reference/profiler-format.md §6). The
// file is a bare JSON array of Chrome-trace events (a {"traceEvents": [...]}
// wrapper is accepted too). Events are framed one at a time from a fixed-size
// window, and only the fields npumon uses are decoded, so memory stays bounded
// by the largest single event and 100 MB files read in well under a second.

// TraceEvent is the decoded subset of one Chrome-trace event.
type TraceEvent struct {
	Ph        string
	Name      string
	Cat       string
	PID, TID  int64
	TsNS      int64 // epoch ns ("ts" is epoch µs, usually a string with 3 decimals)
	DurNS     int64
	HasTs     bool
	ID        string // flow id, as text
	ArgName   string // args.name of M events
	Seq       int64  // args["Sequence number"], -1 if absent
	FwdTID    int64  // args["Fwd thread id"]
	InputDims string // args["Input Dims"]
	InputType string // args["Input type"]
	CallStack string // args["Call stack"]
	Module    string // args["Module Hierarchy"]
	CorrID    int64  // args.correlation_id, -1 if absent
}

// ErrTruncatedTrace marks a trace_view.json that ends before its closing
// bracket (the analyser writes it in two parts,
// docs/reference/profiler-format.md §1.3). Events before the cut have been
// delivered.
var ErrTruncatedTrace = errors.New("trace ends before its closing ']'")

const maxTraceEvent = 64 << 20

// ReadTraceView streams the events of r to fn. Its errors are
// *safefile.OffsetError with File name and the byte offset of the
// offending event.
func ReadTraceView(r io.Reader, name string, fn func(*TraceEvent) error) error {
	s := &traceScanner{r: r, buf: make([]byte, 0, 1<<20), names: map[string]string{}}
	if err := s.start(); err != nil {
		return &safefile.OffsetError{File: name, Offset: s.off + int64(s.i), Err: err}
	}
	var ev TraceEvent
	p := jsonParser{names: s.names}
	for {
		obj, off, err := s.nextObject()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &safefile.OffsetError{File: name, Offset: off, Err: err}
		}
		ev = TraceEvent{Seq: -1, CorrID: -1}
		p.b, p.i = obj, 0
		if err := p.event(&ev); err != nil {
			return &safefile.OffsetError{File: name, Offset: off + int64(p.i), Err: err}
		}
		if err := fn(&ev); err != nil {
			return err
		}
	}
}

type traceScanner struct {
	r     io.Reader
	buf   []byte
	i     int   // scan position in buf
	off   int64 // file offset of buf[0]
	eof   bool
	names map[string]string
}

// fill reads more bytes, dropping buf[:keep].
func (s *traceScanner) fill(keep int) error {
	if s.eof {
		return io.EOF
	}
	if keep > 0 {
		n := copy(s.buf, s.buf[keep:])
		s.buf = s.buf[:n]
		s.off += int64(keep)
		s.i -= keep
	}
	if cap(s.buf)-len(s.buf) < 64<<10 {
		if len(s.buf) >= maxTraceEvent {
			return fmt.Errorf("event larger than %d bytes", maxTraceEvent)
		}
		nb := make([]byte, len(s.buf), 2*cap(s.buf))
		copy(nb, s.buf)
		s.buf = nb
	}
	n, err := s.r.Read(s.buf[len(s.buf):cap(s.buf)])
	s.buf = s.buf[:len(s.buf)+n]
	if err == io.EOF {
		s.eof = true
		if n == 0 {
			return io.EOF
		}
		return nil
	}
	return err
}

// peek skips whitespace and returns the next byte.
func (s *traceScanner) peek() (byte, error) {
	for {
		for s.i < len(s.buf) {
			c := s.buf[s.i]
			if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
				return c, nil
			}
			s.i++
		}
		if err := s.fill(s.i); err != nil {
			return 0, err
		}
	}
}

func (s *traceScanner) start() error {
	c, err := s.peek()
	if err == io.EOF {
		return errors.New("empty file")
	}
	if err != nil {
		return err
	}
	switch c {
	case '[':
		s.i++
		return nil
	case '{':
		// Find the traceEvents array; read until its key appears.
		for {
			if k := bytes.Index(s.buf, []byte(`"traceEvents"`)); k >= 0 {
				s.i = k + len(`"traceEvents"`)
				for {
					c, err := s.peek()
					if err != nil {
						return errors.New("traceEvents has no array")
					}
					s.i++
					if c == '[' {
						return nil
					}
					if c != ':' {
						return errors.New("traceEvents is not an array")
					}
				}
			}
			if len(s.buf) > maxTraceEvent {
				return errors.New("no traceEvents array")
			}
			if err := s.fill(0); err != nil {
				return errors.New("no traceEvents array")
			}
		}
	}
	return fmt.Errorf("trace does not start with '[' or '{' (got %q)", c)
}

// nextObject returns the bytes of the next event object (valid until the next call).
func (s *traceScanner) nextObject() ([]byte, int64, error) {
	for {
		c, err := s.peek()
		if err == io.EOF {
			return nil, s.off + int64(s.i), ErrTruncatedTrace
		}
		if err != nil {
			return nil, s.off + int64(s.i), err
		}
		switch c {
		case ',':
			s.i++
			continue
		case ']':
			s.i++
			return nil, 0, io.EOF
		case '{':
		default:
			return nil, s.off + int64(s.i), fmt.Errorf("unexpected %q between events", c)
		}
		break
	}
	// Frame the object: the framer's state carries across refills.
	start := s.i
	var f valueFramer
	j := s.i
	for {
		if n := f.scan(s.buf[j:]); n >= 0 {
			s.i = j + n
			return s.buf[start:s.i], s.off + int64(start), nil
		}
		rel := len(s.buf) - start
		if err := s.fill(start); err != nil {
			if err == io.EOF {
				return nil, s.off, ErrTruncatedTrace
			}
			return nil, s.off, err
		}
		start = 0
		j = rel
	}
}

// valueFramer finds the end of a JSON object or array by tracking nesting
// outside strings; its state carries over, so a value may be fed in pieces.
type valueFramer struct {
	depth      int
	inStr, esc bool
}

// scan returns the index just past the value's closing bracket in b, or -1
// when b ends first.
func (f *valueFramer) scan(b []byte) int {
	for j := 0; j < len(b); j++ {
		if f.inStr {
			if f.esc {
				f.esc = false
				continue
			}
			// Jump to the next quote or backslash: most bytes are string text.
			k := indexQuoteOrBackslash(b[j:])
			if k < 0 {
				return -1
			}
			j += k
			if b[j] == '\\' {
				f.esc = true
			} else {
				f.inStr = false
			}
			continue
		}
		switch b[j] {
		case '"':
			f.inStr = true
		case '{', '[':
			f.depth++
		case '}', ']':
			f.depth--
			if f.depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}

// indexQuoteOrBackslash returns the index of the first '"' or '\\' in b, or -1.
func indexQuoteOrBackslash(b []byte) int {
	q := bytes.IndexByte(b, '"')
	if q < 0 {
		return bytes.IndexByte(b, '\\')
	}
	if bs := bytes.IndexByte(b[:q], '\\'); bs >= 0 {
		return bs
	}
	return q
}

// jsonParser decodes one framed event object.
type jsonParser struct {
	b     []byte
	i     int
	names map[string]string
	tmp   []byte
	tmp2  []byte
}

var errSyntax = errors.New("malformed JSON")

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\n', '\r', '\t':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) expect(c byte) error {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != c {
		return fmt.Errorf("%w: expected %q", errSyntax, c)
	}
	p.i++
	return nil
}

// rawString returns the contents of a string value and whether it has escapes.
func (p *jsonParser) rawString() ([]byte, bool, error) {
	if err := p.expect('"'); err != nil {
		return nil, false, err
	}
	start, esc := p.i, false
	for p.i < len(p.b) {
		k := indexQuoteOrBackslash(p.b[p.i:])
		if k < 0 {
			break
		}
		p.i += k
		if p.b[p.i] == '\\' {
			esc = true
			p.i += 2
			continue
		}
		s := p.b[start:p.i]
		p.i++
		return s, esc, nil
	}
	return nil, false, fmt.Errorf("%w: unterminated string", errSyntax)
}

// name interns a short repeated string (names, phases, categories).
func (p *jsonParser) name() (string, error) {
	raw, esc, err := p.rawString()
	if err != nil {
		return "", err
	}
	if esc {
		return p.unescape(raw)
	}
	if v, ok := p.names[string(raw)]; ok {
		return v, nil
	}
	v := string(raw)
	if len(p.names) < 1<<16 {
		p.names[v] = v
	}
	return v, nil
}

func (p *jsonParser) unescape(raw []byte) (string, error) {
	b, err := p.unescapeBytes(raw)
	return string(b), err
}

// unescapeBytes decodes JSON escapes into p.tmp (valid until the next call).
func (p *jsonParser) unescapeBytes(raw []byte) ([]byte, error) {
	out := p.tmp[:0]
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(raw) {
			return nil, fmt.Errorf("%w: bad escape", errSyntax)
		}
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := hex4(raw[i+1:])
			if n < 0 {
				return nil, fmt.Errorf("%w: bad \\u escape", errSyntax)
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, n2 := hex4(raw[min(i+3, len(raw)):]); n2 >= 0 && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, fmt.Errorf("%w: bad escape", errSyntax)
		}
	}
	p.tmp = out
	return out, nil
}

func hex4(b []byte) (rune, int) {
	if len(b) < 4 {
		return 0, -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, -1
		}
	}
	return r, 4
}

// scalar returns the text of a number/literal, or a string's contents.
func (p *jsonParser) scalar() ([]byte, error) {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '"' {
		raw, _, err := p.rawString()
		return raw, err
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t' {
			break
		}
		p.i++
	}
	if p.i == start {
		return nil, fmt.Errorf("%w: missing value", errSyntax)
	}
	return p.b[start:p.i], nil
}

func (p *jsonParser) int() (int64, error) {
	s, err := p.scalar()
	if err != nil {
		return 0, err
	}
	if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		return n, nil
	}
	if f, err := strconv.ParseFloat(string(s), 64); err == nil && !math.IsInf(f, 0) && math.Abs(f) < 9e18 {
		return int64(f), nil
	}
	return 0, nil // non-numeric ids (some CANN pids are strings) → 0
}

// skip skips any JSON value.
func (p *jsonParser) skip() error {
	p.ws()
	if p.i >= len(p.b) {
		return fmt.Errorf("%w: missing value", errSyntax)
	}
	switch p.b[p.i] {
	case '"':
		_, _, err := p.rawString()
		return err
	case '{', '[':
		var f valueFramer
		if n := f.scan(p.b[p.i:]); n >= 0 {
			p.i += n
			return nil
		}
		p.i = len(p.b)
		return fmt.Errorf("%w: unterminated value", errSyntax)
	}
	_, err := p.scalar()
	return err
}

// object iterates the keys of an object value.
func (p *jsonParser) object(fn func(key []byte) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		key, _, err := p.rawString()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := fn(key); err != nil {
			return err
		}
		p.ws()
		if p.i >= len(p.b) {
			return fmt.Errorf("%w: unterminated object", errSyntax)
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return fmt.Errorf("%w: expected ',' or '}'", errSyntax)
		}
	}
}

func (p *jsonParser) event(ev *TraceEvent) error {
	return p.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "ph":
			ev.Ph, err = p.name()
		case "name":
			ev.Name, err = p.name()
		case "cat":
			ev.Cat, err = p.name()
		case "pid":
			ev.PID, err = p.int()
		case "tid":
			ev.TID, err = p.int()
		case "id":
			var s []byte
			s, err = p.scalar()
			ev.ID = string(s)
		case "ts":
			var s []byte
			if s, err = p.scalar(); err == nil {
				if ev.TsNS, err = parseUSToNS(string(s)); err != nil {
					return fmt.Errorf("bad ts %q", truncate(string(s), 40))
				}
				ev.HasTs = true
			}
		case "dur":
			var s []byte
			if s, err = p.scalar(); err == nil {
				if ev.DurNS, err = parseUSToNS(string(s)); err != nil {
					return fmt.Errorf("bad dur %q", truncate(string(s), 40))
				}
			}
		case "args":
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == '{' {
				return p.args(ev)
			}
			return p.skip()
		default:
			return p.skip()
		}
		return err
	})
}

func (p *jsonParser) args(ev *TraceEvent) error {
	return p.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "name":
			p.ws()
			if p.i < len(p.b) && p.b[p.i] == '"' {
				ev.ArgName, err = p.name()
				return err
			}
			return p.skip()
		case "Sequence number":
			ev.Seq, err = p.int()
		case "Fwd thread id":
			ev.FwdTID, err = p.int()
		case "correlation_id":
			ev.CorrID, err = p.int()
		case "Input Dims":
			ev.InputDims, err = p.argString()
		case "Input type":
			ev.InputType, err = p.argString()
		case "Call stack":
			ev.CallStack, err = p.argString()
		case "Module Hierarchy":
			ev.Module, err = p.argString()
		default:
			return p.skip()
		}
		return err
	})
}

// argString reads a string arg, undoing the ";\r\n" display formatting;
// repeated values (shapes, stacks) are interned.
func (p *jsonParser) argString() (string, error) {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] != '"' {
		return "", p.skip()
	}
	raw, esc, err := p.rawString()
	if err != nil {
		return "", err
	}
	if esc {
		if raw, err = p.unescapeBytes(raw); err != nil {
			return "", err
		}
	}
	if bytes.IndexByte(raw, '\r') >= 0 || bytes.IndexByte(raw, '\n') >= 0 {
		out := p.tmp2[:0]
		for _, c := range raw {
			if c != '\r' && c != '\n' {
				out = append(out, c)
			}
		}
		p.tmp2, raw = out, out
	}
	if v, ok := p.names[string(raw)]; ok {
		return v, nil
	}
	v := string(raw)
	if len(p.names) < 1<<16 && len(v) <= 4096 {
		p.names[v] = v
	}
	return v, nil
}
