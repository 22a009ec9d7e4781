package store

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Retention bounds what a live Store keeps in full detail (docs/retention.md).
// Entries before the window are thinned: the entry log, the per-action
// indexes, the segment-map checkpoints and the block-size overrides are
// dropped in whole chunks, while the byte series (active, allocated,
// reserved) stay for the whole session as min/max buckets, and the peaks
// stay exact (running maxima). The zero Retention keeps everything.
type Retention struct {
	// Entries keeps at least the newest Entries entries per device (0: no
	// bound by count).
	Entries int64
	// Span keeps at least the entries of the last Span of entry time
	// (0: no bound by time).
	Span time.Duration
}

// DefaultRetainEntries is the window a live session keeps by default per
// device: `npumon attach` on `npumon sim`'s shape (≈ 1,500 entries and 250
// ops a training step) then holds ≈ 140 B of Store per entry and levels
// off at 0.43–0.48 GB RSS (BENCHMARKS.md, Retention); a job making a step a
// second keeps 10 minutes of detail, a flood at 1 M entries/s one second.
const DefaultRetainEntries = 1_000_000

// DefaultRetention is what live commands use unless --retain says otherwise.
var DefaultRetention = Retention{Entries: DefaultRetainEntries}

// Enabled reports whether the retention thins anything at all.
func (r Retention) Enabled() bool { return r.Entries > 0 || r.Span > 0 }

// String is the policy as --retain takes it: "all", a count or a duration.
func (r Retention) String() string {
	switch {
	case r.Entries > 0:
		return strconv.FormatInt(r.Entries, 10)
	case r.Span > 0:
		return r.Span.String()
	}
	return "all"
}

// MinRetainEntries is the smallest window by count --retain accepts (one chunk).
const MinRetainEntries = chunkLen

// ParseRetention reads a --retain value: "all" (keep everything), a number
// of entries (e.g. 2000000, at least 4096), or a duration of entry time
// (e.g. 30m, 2h; at least 1s).
func ParseRetention(s string) (Retention, error) {
	t := strings.TrimSpace(s)
	if t == "all" {
		return Retention{}, nil
	}
	if t == "" {
		return Retention{}, fmt.Errorf("empty value: want a number of entries (e.g. 2000000), a duration (e.g. 30m) or all")
	}
	if t[0] >= '0' && t[0] <= '9' && strings.IndexFunc(t, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return Retention{}, fmt.Errorf("%q: too large a number of entries", s)
		}
		if n < MinRetainEntries {
			return Retention{}, fmt.Errorf("%q: keep at least %d entries (or all)", s, MinRetainEntries)
		}
		return Retention{Entries: n}, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return Retention{}, fmt.Errorf("%q: want a number of entries (e.g. 2000000), a duration with its unit (e.g. 30m, 2h) or all", s)
	}
	if d < time.Second {
		return Retention{}, fmt.Errorf("%q: keep at least 1s of history (or all)", s)
	}
	return Retention{Span: d}, nil
}

// RetainInfo says what a device log thinned.
type RetainInfo struct {
	Thinned    int64 // entries before the window (their detail was dropped)
	DetailFrom int64 // the cursor of the earliest position still held in detail (Thinned > 0)
}

// Retention returns the Store's policy.
func (s *Store) Retention() Retention {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.retain
}

// Retained says what device's log thinned so far.
func (s *Store) Retained(device int) RetainInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.devs[device]
	if d == nil || d.off == 0 {
		return RetainInfo{}
	}
	return RetainInfo{Thinned: d.off, DetailFrom: d.thin.lastTime}
}

// Held returns the entries held in detail over all devices.
func (s *Store) Held() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, d := range s.devs {
		n += int64(d.recs.Len()) - d.off
	}
	return n
}

// thinBucket is the byte series over consecutive thinned entries.
type thinBucket struct {
	t0, t1        int64 // times of its first and last entry
	n             int64 // entries in it
	act, alc, res MinMax
	lastA, lastL  int64 // active and allocated after its last entry
	lastR         int64 // reserved after its last entry
}

// thinned is a device log's series before the window: buckets of at most
// span entries; when there are maxThinBuckets of them, neighbours merge
// and span doubles, so the whole session fits in a bounded size.
type thinned struct {
	buckets  []thinBucket
	span     int64
	lastTime int64 // time of the last thinned entry (the window's first cursor)
	// running maxima over the thinned entries (the peaks stay exact)
	peakA, peakL, peakR int64
	peakATime           int64
	havePeak            bool
}

const (
	thinSpan0      = 512
	maxThinBuckets = 1 << 13
)

func (t *thinned) add(time, a, l, r int64) {
	if t.span == 0 {
		t.span = thinSpan0
	}
	if k := len(t.buckets); k == 0 || t.buckets[k-1].n >= t.span {
		if k == maxThinBuckets {
			t.merge()
		}
		t.buckets = append(t.buckets, thinBucket{t0: time, act: MinMax{a, a}, alc: MinMax{l, l}, res: MinMax{r, r}})
	}
	b := &t.buckets[len(t.buckets)-1]
	b.t1, b.n = time, b.n+1
	b.act.Min, b.act.Max = min(b.act.Min, a), max(b.act.Max, a)
	b.alc.Min, b.alc.Max = min(b.alc.Min, l), max(b.alc.Max, l)
	b.res.Min, b.res.Max = min(b.res.Min, r), max(b.res.Max, r)
	b.lastA, b.lastL, b.lastR = a, l, r
	t.lastTime = time
	if !t.havePeak || a > t.peakA {
		t.peakA, t.peakATime = a, time
	}
	if !t.havePeak {
		t.peakL, t.peakR = l, r
	}
	t.peakL, t.peakR = max(t.peakL, l), max(t.peakR, r)
	t.havePeak = true
}

// merge halves the buckets, pairing neighbours.
func (t *thinned) merge() {
	out := t.buckets[:0]
	for i := 0; i < len(t.buckets); i += 2 {
		b := t.buckets[i]
		if i+1 < len(t.buckets) {
			c := t.buckets[i+1]
			b.t1, b.n = c.t1, b.n+c.n
			b.act = MinMax{min(b.act.Min, c.act.Min), max(b.act.Max, c.act.Max)}
			b.alc = MinMax{min(b.alc.Min, c.alc.Min), max(b.alc.Max, c.alc.Max)}
			b.res = MinMax{min(b.res.Min, c.res.Min), max(b.res.Max, c.res.Max)}
			b.lastA, b.lastL, b.lastR = c.lastA, c.lastL, c.lastR
		}
		out = append(out, b)
	}
	clear(t.buckets[len(out):])
	t.buckets = out
	t.span *= 2
}

// column is one Series column [cs, ce) over the thinned part: the value
// entering it and the extremes of every bucket overlapping it (a bucket
// wider than the column widens it: peaks always show).
func (t *thinned) column(d *devLog, cs, ce int64) (MinMax, MinMax, MinMax) {
	i := sort.Search(len(t.buckets), func(i int) bool { return t.buckets[i].t1 >= cs })
	a, l, r := d.initActive, d.initAllocated, d.initReserv
	if i > 0 {
		b := &t.buckets[i-1]
		a, l, r = b.lastA, b.lastL, b.lastR
	}
	ma, ml, mr := MinMax{a, a}, MinMax{l, l}, MinMax{r, r}
	for ; i < len(t.buckets) && t.buckets[i].t0 < ce; i++ {
		b := &t.buckets[i]
		ma = MinMax{min(ma.Min, b.act.Min), max(ma.Max, b.act.Max)}
		ml = MinMax{min(ml.Min, b.alc.Min), max(ml.Max, b.alc.Max)}
		mr = MinMax{min(mr.Min, b.res.Min), max(mr.Max, b.res.Max)}
	}
	return ma, ml, mr
}

// positionIn returns the number of thinned entries with time ≤ cursor, to
// a bucket's resolution (the end of the last bucket ending at or before it).
func (t *thinned) positionIn(cursor int64) int64 {
	var n int64
	for i := range t.buckets {
		if t.buckets[i].t1 > cursor {
			break
		}
		n += t.buckets[i].n
	}
	return n
}

// timeAt returns the time of the last entry of the bucket holding thinned
// position n (the state after n entries), to a bucket's resolution.
func (t *thinned) timeAt(n int64) int64 {
	var c int64
	for i := range t.buckets {
		c += t.buckets[i].n
		if c >= n {
			return t.buckets[i].t1
		}
	}
	return t.lastTime
}

// retainDue returns the position detail should start at under r: a chunk
// boundary, or d.off when nothing more is due.
func (d *devLog) retainDue(r Retention) int64 {
	n := int64(d.recs.Len())
	to := d.off
	if r.Entries > 0 && n-r.Entries >= d.off+chunkLen {
		to = (n - r.Entries) &^ chunkMask
	}
	if r.Span > 0 && n > 0 {
		cut := d.recs.last().time - r.Span.Microseconds()
		if d.base == TimeSequence {
			cut = -1 // a log without times has no age
		}
		// whole chunks whose last entry is older than the cut
		for c := to + chunkLen; c < n && d.recs.ptr(int(c-1)).time < cut; c += chunkLen {
			to = c
		}
	}
	return to
}

// thinTo drops the detail of the entries before position to (below the
// log's length; moved back to the checkpoint at or before it): their byte
// series go into the thinned buckets, and the whole chunks of the log, the
// indexes and the series before it, the checkpoints and the overrides
// before it are released.
func (d *devLog) thinTo(to int64) {
	if to <= d.off || to >= int64(d.recs.Len()) {
		return
	}
	// the detail starts at a checkpoint: the last one at or before to, as
	// it is (no roll, no sort); only when none lies past the current start
	// is one made at to, before the entries it rolls over go
	k := sort.Search(len(d.cps), func(i int) bool { return d.cps[i].At > to }) - 1
	if k >= 0 && d.cps[k].At > d.off {
		to = d.cps[k].At
	} else {
		cp := d.checkpointAt(to)
		k = sort.Search(len(d.cps), func(i int) bool { return d.cps[i].At >= to })
		d.cps = append(d.cps[:k:k], append([]*checkpoint{cp}, d.cps[k:]...)...)
	}
	if d.off == 0 && d.recs.Len() > 0 {
		d.firstTime = d.recs.ptr(0).time
	}
	res := d.reserved.walk(int(d.off))
	for j := d.off; j < to; j++ {
		d.thin.add(d.recs.ptr(int(j)).time, d.active.at(int(j)), d.allocated.at(int(j)), res.value())
	}
	d.off = to
	d.recs.dropBefore(int(to))
	d.active.dropBefore(int(to))
	d.allocated.dropBefore(int(to))
	d.reserved.dropBefore(int(to))
	for a := range d.byAction {
		seqs := &d.byAction[a]
		if seqs.Len() > 0 {
			seqs.dropBefore(countBelow(seqs, to))
		}
	}
	rest := len(d.cps) - k
	copy(d.cps, d.cps[k:])
	clear(d.cps[rest:])
	d.cps = d.cps[:rest]
	d.sizes.dropBefore(int(to))
	// a capture's overrides (its surviving objects; live logs add none):
	// empty once the window has passed them
	for seq := range d.ov.Blocks {
		if seq < to {
			delete(d.ov.Blocks, seq)
		}
	}
	for seq := range d.ov.Segs {
		if seq < to {
			delete(d.ov.Segs, seq)
		}
	}
	d.lastMu.Lock()
	if d.last != nil && d.last.At < to {
		d.last = nil
	}
	d.measured = measured{}
	d.lastMu.Unlock()
}

// sizeAt is the block size the producer sent for the alloc at seq (0:
// none), from the per-entry table AppendSized keeps (tiling.Overrides.Sizes).
func (d *devLog) sizeAt(seq int64) int64 {
	if seq < int64(d.sizes.lo()) || seq >= int64(d.sizes.Len()) {
		return 0
	}
	return d.sizes.at(int(seq))
}

// retainOps drops old ops, once they are at least half of the ops held
// (so each op is moved at most once on average). Where every device log
// was thinned, the ops that ended before every device's detail go; a Store
// whose logs are whole (captures, or only ops, as a watched profiler
// directory) applies the policy to the ops themselves: the newest Entries
// ops, or those that ended in the last Span. The caller holds the write lock.
func (s *Store) retainOps() {
	if !s.retain.Enabled() || len(s.ops) < 2*chunkLen {
		return
	}
	i, byCount := 0, false
	cut, thinned := int64(0), len(s.devs) > 0
	for _, d := range s.devs {
		if d.off == 0 || d.base == TimeSequence {
			thinned = false
			break
		}
		if cut == 0 || d.thin.lastTime < cut {
			cut = d.thin.lastTime
		}
	}
	switch {
	case thinned:
	case s.retain.Span > 0:
		cut = s.opMaxEnd[len(s.ops)-1] - s.retain.Span.Microseconds()
	default:
		i, byCount = len(s.ops)-int(min(s.retain.Entries, int64(len(s.ops)))), true
	}
	if !byCount {
		// opMaxEnd is non-decreasing: the ops before the first that
		// reaches the cut all ended before it
		i = sort.Search(len(s.ops), func(i int) bool { return s.opMaxEnd[i] >= cut })
	}
	if i < len(s.ops)/2 {
		return
	}
	// the prefix maxima after i may count a dropped op's end: a bound
	// that is only looser (Ops and OpAt still check every op's own end)
	n := copy(s.ops, s.ops[i:])
	clear(s.ops[n:])
	s.ops = s.ops[:n]
	copy(s.opMaxEnd, s.opMaxEnd[i:])
	s.opMaxEnd = s.opMaxEnd[:n]
	s.opIdx.Update(s.opTable(), 0)
	s.opsThinned += int64(i)
	s.opsVer++
	s.opsEdits[s.opsVer%opsEditRing] = opsEdit{s.opsVer, 0}
}
