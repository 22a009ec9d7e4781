package store

import (
	"math"
	"math/bits"
)

// values is a byte series' int64 values, chunked as chunked[int64] is
// (chunkLen a chunk, indexes global, whole chunks dropped from the front),
// in a quarter to a half of the memory: a chunk, once full, is packed.
// Byte totals move by a block size an entry, and block sizes are multiples
// of the allocator's 512 bytes, so a chunk's values, less the least of
// each group of 64 (groupLen), are mostly small multiples of a power of
// two: narrow, 2 bytes a value (the offset shifted right by the trailing
// zeros every offset of the chunk shares) and 8 a group. A chunk whose
// offsets do not fit takes 4 bytes a value from the chunk's least value,
// and one that spans 2³² or more (a hostile or odd input: sizes can be
// anything) stays plain, 8 bytes. Whichever way, every value reads back
// exactly (the arithmetic is modulo 2⁶⁴ both ways). Only the last chunk,
// the one appended to, is plain until it is full; its buffer then serves
// the next one, and packed chunks' buffers dropped from the front are
// reused (a retention window's series turns over without allocating).
type values struct {
	chunks []vchunk // every chunk but the last holds chunkLen values
	skip   int      // chunks dropped from the front
	n      int
	spare  [][]uint32 // dropped packed chunks' offsets, reused
	spareN []*narrow  // dropped narrow chunks, reused
	free   []int64    // a dropped plain chunk of chunkLen, reused
}

// vchunk is one chunk: narrow (nar != nil), packed (off != nil: value j is
// base + off[j]) or plain (wide).
type vchunk struct {
	base int64
	nar  *narrow
	off  []uint32
	wide []int64
}

const (
	groupBits = 6
	groupLen  = 1 << groupBits
)

// narrow is a chunk's values as value j = bases[j/groupLen] + off[j]<<shift.
type narrow struct {
	bases [chunkLen / groupLen]int64
	off   [chunkLen]uint16
	shift uint8
}

func (c *vchunk) at(j int) int64 {
	if c.nar != nil {
		return c.nar.bases[j>>groupBits] + int64(c.nar.off[j])<<c.nar.shift
	}
	if c.off != nil {
		return c.base + int64(c.off[j])
	}
	return c.wide[j]
}

// unpack writes a packed chunk's values [a, b) to dst.
func (c *vchunk) unpack(a, b int, dst []int64) {
	if c.nar != nil {
		nr := c.nar
		for j := a; j < b; j++ {
			dst[j-a] = nr.bases[j>>groupBits] + int64(nr.off[j])<<nr.shift
		}
		return
	}
	for j, o := range c.off[a:b] {
		dst[j] = c.base + int64(o)
	}
}

// Len returns the number of values.
func (v *values) Len() int { return v.n }

// lo is the first index still held.
func (v *values) lo() int { return v.skip << chunkBits }

// at returns value i.
func (v *values) at(i int) int64 { return v.chunks[i>>chunkBits-v.skip].at(i & chunkMask) }

// last returns the last value (0 when empty).
func (v *values) last() int64 {
	if v.n == 0 {
		return 0
	}
	return v.at(v.n - 1)
}

// set replaces value i; a packed chunk the value does not fit turns plain.
func (v *values) set(i int, x int64) {
	c := &v.chunks[i>>chunkBits-v.skip]
	j := i & chunkMask
	switch {
	case c.nar != nil:
		if d := uint64(x) - uint64(c.nar.bases[j>>groupBits]); d>>c.nar.shift <= math.MaxUint16 && d&(1<<c.nar.shift-1) == 0 {
			c.nar.off[j] = uint16(d >> c.nar.shift)
			return
		}
	case c.off != nil:
		if d := uint64(x) - uint64(c.base); d <= math.MaxUint32 {
			c.off[j] = uint32(d)
			return
		}
	default:
		c.wide[j] = x
		return
	}
	w := make([]int64, chunkLen)
	c.unpack(0, chunkLen, w)
	w[j] = x
	v.release(c)
	*c = vchunk{wide: w}
}

// release keeps a packed chunk's buffers for reuse.
func (v *values) release(c *vchunk) {
	if c.nar != nil && len(v.spareN) < maxSpare {
		v.spareN = append(v.spareN, c.nar)
	}
	if c.off != nil && len(v.spare) < maxSpare {
		v.spare = append(v.spare, c.off)
	}
}

// open returns the chunk to append to, packing the full one before it.
func (v *values) open() *vchunk {
	k := v.n>>chunkBits - v.skip
	if k == len(v.chunks) {
		var buf []int64
		switch {
		case v.n == 0:
			buf = make([]int64, 0, 16)
		case k > 0 && v.chunks[k-1].nar == nil && v.chunks[k-1].off == nil && len(v.chunks[k-1].wide) == chunkLen:
			buf = v.pack(&v.chunks[k-1])
		}
		if buf == nil && v.free != nil {
			buf, v.free = v.free[:0], nil
		}
		if buf == nil {
			buf = make([]int64, 0, chunkLen)
		}
		v.chunks = append(v.chunks, vchunk{wide: buf})
	}
	c := &v.chunks[k]
	if k == 0 && v.skip == 0 && len(c.wide) == cap(c.wide) {
		// the first chunk doubles up to exactly chunkLen, as chunked's
		grown := make([]int64, len(c.wide), min(2*cap(c.wide), chunkLen))
		copy(grown, c.wide)
		c.wide = grown
	}
	return c
}

// pack packs a full plain chunk, narrow or else in 4 bytes a value when
// it can, and returns its buffer emptied for reuse (nil when it stays
// plain).
func (v *values) pack(c *vchunk) []int64 {
	w := c.wide[:chunkLen]
	var bases [chunkLen / groupLen]int64
	var or, span uint64 // the offsets' bits, the widest group's span
	lo, hi := w[0], w[0]
	for g := range bases {
		grp := w[g*groupLen : (g+1)*groupLen]
		gl, gh := grp[0], grp[0]
		for _, x := range grp {
			gl, gh = min(gl, x), max(gh, x)
			// differences from the first share the trailing zeros of
			// those from the least (itself one of the values)
			or |= uint64(x) - uint64(grp[0])
		}
		bases[g] = gl
		span = max(span, uint64(gh)-uint64(gl))
		lo, hi = min(lo, gl), max(hi, gh)
	}
	shift := uint8(0)
	if or != 0 {
		shift = uint8(bits.TrailingZeros64(or))
	}
	switch {
	case span>>shift <= math.MaxUint16:
		var nr *narrow
		if n := len(v.spareN); n > 0 {
			nr, v.spareN = v.spareN[n-1], v.spareN[:n-1]
		} else {
			nr = new(narrow)
		}
		nr.bases, nr.shift = bases, shift
		for j, x := range w {
			nr.off[j] = uint16((uint64(x) - uint64(bases[j>>groupBits])) >> shift)
		}
		*c = vchunk{nar: nr}
	case uint64(hi)-uint64(lo) <= math.MaxUint32:
		var off []uint32
		if n := len(v.spare); n > 0 {
			off, v.spare = v.spare[n-1][:chunkLen], v.spare[:n-1]
		} else {
			off = make([]uint32, chunkLen)
		}
		for j, x := range w {
			off[j] = uint32(uint64(x) - uint64(lo))
		}
		*c = vchunk{base: lo, off: off}
	default:
		return nil
	}
	return w[:0]
}

// append adds x at the end.
func (v *values) append(x int64) {
	c := v.open()
	c.wide = append(c.wide, x)
	v.n++
}

// appendAll appends xs, the runs that fit in the open chunk at once.
func (v *values) appendAll(xs []int64) {
	for len(xs) > 0 {
		c := v.open()
		m := min(cap(c.wide)-len(c.wide), len(xs)) // ≥ 1: open made room
		c.wide = append(c.wide, xs[:m]...)
		v.n += m
		xs = xs[m:]
	}
}

// reserve sizes the first chunk for n values when the sequence is empty.
func (v *values) reserve(n int) {
	if v.n == 0 && len(v.chunks) == 0 && n > 0 {
		v.chunks = append(v.chunks, vchunk{wide: make([]int64, 0, min(n, chunkLen))})
	}
}

// dropBefore releases the whole chunks holding only values before i;
// indexes keep their meaning, values before lo() must not be read.
func (v *values) dropBefore(i int) {
	k := min(i, v.n)>>chunkBits - v.skip
	if k <= 0 {
		return
	}
	for q := range v.chunks[:k] {
		c := &v.chunks[q]
		v.release(c)
		if c.wide != nil && cap(c.wide) == chunkLen && v.free == nil {
			v.free = c.wide
		}
	}
	clear(v.chunks[:k])
	v.chunks = v.chunks[k:]
	v.skip += k
}

// each calls fn with the consecutive pieces of values [i, j); a packed
// chunk's are unpacked into a buffer fn must not keep.
func (v *values) each(i, j int, fn func([]int64)) {
	var buf [256]int64
	for i < j {
		c := &v.chunks[i>>chunkBits-v.skip]
		a := i & chunkMask
		if c.nar == nil && c.off == nil {
			end := min(j-(i&^chunkMask), len(c.wide))
			fn(c.wide[a:end])
			i += end - a
			continue
		}
		end := min(j-(i&^chunkMask), chunkLen, a+len(buf))
		p := buf[:end-a]
		c.unpack(a, end, p)
		fn(p)
		i += end - a
	}
}

// extremes widens lo, hi by the values [i, j).
func (v *values) extremes(i, j int, lo, hi int64) (int64, int64) {
	for i < j {
		c := &v.chunks[i>>chunkBits-v.skip]
		a := i & chunkMask
		end := min(j-(i&^chunkMask), chunkLen)
		switch {
		case c.nar != nil:
			nr := c.nar
			for a < end { // a group at a time: offsets compare within one
				ge := min(end, (a|(groupLen-1))+1)
				ol, oh := nr.off[a], nr.off[a]
				for _, o := range nr.off[a:ge] {
					ol, oh = min(ol, o), max(oh, o)
				}
				b := nr.bases[a>>groupBits]
				lo, hi = min(lo, b+int64(ol)<<nr.shift), max(hi, b+int64(oh)<<nr.shift)
				i += ge - a
				a = ge
			}
			continue
		case c.off != nil:
			ol, oh := c.off[a], c.off[a]
			for _, o := range c.off[a:end] {
				ol, oh = min(ol, o), max(oh, o)
			}
			lo, hi = min(lo, c.base+int64(ol)), max(hi, c.base+int64(oh))
		default:
			for _, x := range c.wide[a:end] {
				lo, hi = min(lo, x), max(hi, x)
			}
		}
		i += end - a
	}
	return lo, hi
}

// update calls fn with every chunk's values from index lo on, to change
// them in place (a capture's series made relative to its start); packed
// chunks are unpacked for it and packed again.
func (v *values) update(fn func(lo int, xs []int64)) {
	var buf []int64
	for k := range v.chunks {
		c := &v.chunks[k]
		lo := (v.skip + k) << chunkBits
		if c.nar == nil && c.off == nil {
			fn(lo, c.wide)
			continue
		}
		if buf == nil {
			buf = make([]int64, chunkLen)
		}
		c.unpack(0, chunkLen, buf)
		fn(lo, buf)
		v.release(c) // pack takes its buffers back
		*c = vchunk{wide: buf}
		if v.pack(c) == nil { // stays plain: its own buffer, not buf
			c.wide = append(make([]int64, 0, chunkLen), buf...)
		}
	}
}

// mmLevel is a level of a series' pyramid: its items' minima and maxima,
// each a values (so packed alike).
type mmLevel struct{ mins, maxs values }

func (l *mmLevel) Len() int { return l.mins.n }

// lo is the first item still held.
func (l *mmLevel) lo() int { return l.mins.lo() }

func (l *mmLevel) at(k int) MinMax { return MinMax{l.mins.at(k), l.maxs.at(k)} }

func (l *mmLevel) append(m MinMax) {
	l.mins.append(m.Min)
	l.maxs.append(m.Max)
}

// widen widens item k by m, or appends m when k is one past the last item.
func (l *mmLevel) widen(k int, m MinMax) {
	if k == l.Len() {
		l.append(m)
		return
	}
	lc, hc := &l.mins.chunks[k>>chunkBits-l.mins.skip], &l.maxs.chunks[k>>chunkBits-l.maxs.skip]
	if lc.wide != nil && hc.wide != nil { // plain (the open chunk: k is the last item)
		p, q := &lc.wide[k&chunkMask], &hc.wide[k&chunkMask]
		*p, *q = min(*p, m.Min), max(*q, m.Max)
		return
	}
	if x := l.mins.at(k); m.Min < x {
		l.mins.set(k, m.Min)
	}
	if x := l.maxs.at(k); m.Max > x {
		l.maxs.set(k, m.Max)
	}
}

func (l *mmLevel) dropBefore(k int) {
	l.mins.dropBefore(k)
	l.maxs.dropBefore(k)
}

// extremes widens lo, hi by items [a, b).
func (l *mmLevel) extremes(a, b int, lo, hi int64) (int64, int64) {
	return l.mins.least(a, b, lo), l.maxs.most(a, b, hi)
}

// least is min(lo, the values [i, j)).
func (v *values) least(i, j int, lo int64) int64 {
	for i < j {
		c := &v.chunks[i>>chunkBits-v.skip]
		a := i & chunkMask
		end := min(j-(i&^chunkMask), chunkLen)
		i += end - a
		switch {
		case c.nar != nil:
			nr := c.nar
			for a < end { // a group at a time: offsets compare within one
				ge := min(end, (a|(groupLen-1))+1)
				o := nr.off[a]
				for _, x := range nr.off[a+1 : ge] {
					o = min(o, x)
				}
				lo = min(lo, nr.bases[a>>groupBits]+int64(o)<<nr.shift)
				a = ge
			}
		case c.off != nil:
			o := c.off[a]
			for _, x := range c.off[a+1 : end] {
				o = min(o, x)
			}
			lo = min(lo, c.base+int64(o))
		default:
			for _, x := range c.wide[a:end] {
				lo = min(lo, x)
			}
		}
	}
	return lo
}

// most is max(hi, the values [i, j)).
func (v *values) most(i, j int, hi int64) int64 {
	for i < j {
		c := &v.chunks[i>>chunkBits-v.skip]
		a := i & chunkMask
		end := min(j-(i&^chunkMask), chunkLen)
		i += end - a
		switch {
		case c.nar != nil:
			nr := c.nar
			for a < end {
				ge := min(end, (a|(groupLen-1))+1)
				o := nr.off[a]
				for _, x := range nr.off[a+1 : ge] {
					o = max(o, x)
				}
				hi = max(hi, nr.bases[a>>groupBits]+int64(o)<<nr.shift)
				a = ge
			}
		case c.off != nil:
			o := c.off[a]
			for _, x := range c.off[a+1 : end] {
				o = max(o, x)
			}
			hi = max(hi, c.base+int64(o))
		default:
			for _, x := range c.wide[a:end] {
				hi = max(hi, x)
			}
		}
	}
	return hi
}
