package store

import "github.com/npumon/npumon/allocator/snapshot"

// rec is one stored entry. For oom entries addr holds DeviceFree.
type rec struct {
	time   int64
	addr   uint64
	size   int64
	frames snapshot.StackID
	attr   uint32
	action snapshot.Action
}

// recBody is a record but for its action: 32 bytes, no padding (a rec
// would take 40).
type recBody struct {
	time   int64
	addr   uint64
	size   int64
	frames snapshot.StackID
	attr   uint32
}

// records are a log's records in two columns of the same chunking: the
// bodies and the actions (33 bytes an entry). The bodies' chunked is
// embedded: Len, lo, ptr (a body), search and searchFrom (over bodies)
// are its own.
type records struct {
	chunked[recBody]
	acts chunked[snapshot.Action]
}

func (r rec) body() recBody {
	return recBody{time: r.time, addr: r.addr, size: r.size, frames: r.frames, attr: r.attr}
}

func (b *recBody) with(a snapshot.Action) rec {
	return rec{time: b.time, addr: b.addr, size: b.size, frames: b.frames, attr: b.attr, action: a}
}

// append adds r at the end.
func (rs *records) append(r rec) {
	rs.chunked.append(r.body())
	rs.acts.append(r.action)
}

// at returns record i.
func (rs *records) at(i int) rec { return rs.ptr(i).with(rs.acts.at(i)) }

// action returns record i's action.
func (rs *records) action(i int) snapshot.Action { return rs.acts.at(i) }

// last returns the last record (the zero value when empty).
func (rs *records) last() rec {
	if rs.n == 0 {
		return rec{}
	}
	return rs.at(rs.n - 1)
}

// reserve sizes the first chunks for n records when empty.
func (rs *records) reserve(n int) {
	rs.chunked.reserve(n)
	rs.acts.reserve(n)
}

// dropBefore releases the whole chunks holding only records before i.
func (rs *records) dropBefore(i int) {
	rs.chunked.dropBefore(i)
	rs.acts.dropBefore(i)
}

// each calls fn with the consecutive pieces of records [i, j): bodies and
// their actions, of the same length (the two columns chunk alike).
func (rs *records) each(i, j int, fn func([]recBody, []snapshot.Action)) {
	for i < j {
		k := i>>chunkBits - rs.skip
		ch, ac := rs.chunks[k], rs.acts.chunks[k]
		end := min(j-(i&^chunkMask), len(ch))
		fn(ch[i&chunkMask:end], ac[i&chunkMask:end])
		i += end - i&chunkMask
	}
}
