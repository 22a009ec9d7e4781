package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/npumon/npumon/allocator/snapshot"
)

// JSON snapshots (the same shape, as PyTorch's viewer accepts) are streamed
// token by token into the same builder the pickle VM feeds, so both formats
// produce identical models.

// Read lets encoding/json consume the byteReader, buffered bytes first.
func (b *byteReader) Read(p []byte) (int, error) {
	if b.pos >= b.end && !b.fill(1) {
		if b.err != nil {
			return 0, b.err
		}
		return 0, io.EOF
	}
	n := copy(p, b.buf[b.pos:b.end])
	b.pos += n
	return n, nil
}

// jsonLevel is one open JSON container. Arrays hold up to two leading ints
// back, since a 2-int array is a pool id (a tuple in the pickle).
type jsonLevel struct {
	obj  bool
	tab  uint8 // a compact file's stack_table (tabStacks) or one of its rows (tabRow)
	v    val   // the dict, or the list once created
	key  val   // pending object key
	ints []val
}

const (
	tabNone uint8 = iota
	tabStacks
	tabRow
)

func decodeJSON(in *byteReader, b *builder) (*snapshot.Snapshot, string, error) {
	start := in.offset()
	dec := json.NewDecoder(in)
	dec.UseNumber()
	var stack []*jsonLevel
	var top val
	done := false
	var refs compactRefs // a compact file's tables (jsoncompact.go)
	topKeys := 0         // keys of the top-level object so far
	fail := func(err error) (*snapshot.Snapshot, string, error) {
		return nil, "", offsetError(start+dec.InputOffset(), err)
	}
	// add places a finished value into the innermost container.
	add := func(v val) error {
		if len(stack) == 0 {
			top, done = v, true
			return nil
		}
		lv := stack[len(stack)-1]
		switch lv.tab {
		case tabRow:
			if err := refs.row(b, v); err != nil {
				return &keyError{kind: "snapshot", key: stackTableKey,
					err: fmt.Errorf("stack %d, item %d: %w", len(refs.ends), len(refs.fids)-refs.rowStart(), err)}
			}
			return nil
		case tabStacks:
			return &keyError{kind: "snapshot", key: stackTableKey,
				err: fmt.Errorf("stack %d: want a list of frame_table indices, got %s", len(refs.ends), v.k)}
		}
		if lv.obj && lv.key.k == kStr {
			if len(stack) == 1 {
				if handled, err := refs.topKey(b, lv.key.s, v, topKeys); handled || err != nil {
					lv.key = val{}
					return err
				}
			} else if refs.on && lv.key.s == stackRefKey {
				id, err := refs.stack(b, lv.v.d, v)
				if err != nil {
					return err
				}
				k, code := b.intern([]byte("frames"))
				lv.key = val{}
				return b.setItems(lv.v, []val{{k: kStr, s: k, n: code}, {k: kStack, n: uint64(id)}})
			}
		}
		if lv.obj {
			err := b.setItems(lv.v, []val{lv.key, v})
			lv.key = val{}
			return err
		}
		if lv.v.l == nil {
			if (v.k == kInt || v.k == kUint) && len(lv.ints) < 2 {
				lv.ints = append(lv.ints, v)
				return nil
			}
			lv.v = val{k: kList, l: b.newList()}
			if err := b.appendItems(lv.v.l, lv.ints); err != nil {
				return err
			}
			lv.ints = nil
		}
		return b.appendItems(lv.v.l, []val{v})
	}
	for !done {
		if b.overErr != nil {
			return fail(b.overErr)
		}
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				err = ErrTruncated
			} else if err == io.ErrUnexpectedEOF {
				err = truncated{err}
			}
			return fail(err)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if len(stack) >= maxMarkDepth {
					return fail(fmt.Errorf("JSON nested deeper than %d", maxMarkDepth))
				}
				if p := stackTop(stack); p != nil && p.tab != tabNone {
					return fail(refs.misplaced(p.tab, "an object"))
				}
				stack = append(stack, &jsonLevel{obj: true, v: b.newDict()})
			case '[':
				if len(stack) >= maxMarkDepth {
					return fail(fmt.Errorf("JSON nested deeper than %d", maxMarkDepth))
				}
				lv := &jsonLevel{}
				switch p := stackTop(stack); {
				case p == nil:
				case p.tab == tabStacks:
					lv.tab = tabRow
				case p.tab == tabRow:
					return fail(refs.misplaced(p.tab, "a list"))
				case refs.on && len(stack) == 1 && p.obj && p.key.k == kStr && p.key.s == stackTableKey:
					if refs.haveStacks {
						return fail(&keyError{kind: "snapshot", key: stackTableKey, err: errors.New("given twice")})
					}
					lv.tab = tabStacks
				}
				stack = append(stack, lv)
			case '}', ']':
				lv := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				switch lv.tab {
				case tabRow:
					refs.endRow(b)
					continue
				case tabStacks:
					refs.haveStacks = true
					stack[len(stack)-1].key = val{}
					continue
				}
				v := lv.v
				if !lv.obj && v.l == nil {
					if len(lv.ints) == 2 {
						v = val{k: kPair, n: lv.ints[0].n, m: lv.ints[1].n}
					} else {
						v = val{k: kList, l: b.newList()}
						if err := b.appendItems(v.l, lv.ints); err != nil {
							return fail(err)
						}
					}
				}
				if err := add(v); err != nil {
					return fail(err)
				}
			}
		case string:
			is, code := b.intern([]byte(t))
			v := val{k: kStr, s: is, n: code}
			if lv := stackTop(stack); lv != nil && lv.obj && lv.key.k == kNone {
				if len(stack) == 1 {
					topKeys++
				}
				lv.key = v
				continue
			}
			if err := add(v); err != nil {
				return fail(err)
			}
		case json.Number:
			v, err := jsonNumber(t)
			if err != nil {
				return fail(err)
			}
			if err := add(v); err != nil {
				return fail(err)
			}
		case bool:
			v := val{k: kBool}
			if t {
				v.n = 1
			}
			if err := add(v); err != nil {
				return fail(err)
			}
		case nil:
			if err := add(val{k: kNone}); err != nil {
				return fail(err)
			}
		}
	}
	return b.finish(top)
}

func stackTop(s []*jsonLevel) *jsonLevel {
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

func jsonNumber(n json.Number) (val, error) {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return val{k: kInt, n: uint64(i)}, nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return val{k: kUint, n: u}, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return val{}, fmt.Errorf("number %s does not fit 64 bits", s)
	}
	if f == math.Trunc(f) && math.Abs(f) >= 1<<63 {
		return val{}, fmt.Errorf("number %s does not fit 64 bits", s)
	}
	return val{k: kFloat, n: math.Float64bits(f)}, nil
}

// truncated is the JSON decoder's own end-of-input error, with its text,
// as ErrTruncated to errors.Is.
type truncated struct{ error }

func (e truncated) Is(target error) bool { return target == ErrTruncated }
func (e truncated) Unwrap() error        { return e.error }
