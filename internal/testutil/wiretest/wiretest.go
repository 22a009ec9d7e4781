// Package wiretest is what the tests and benchmarks of the live protocol
// (monitor/wire, monitor/attach, e2e) share: short Unix socket paths and
// the entry pattern the live benchmarks publish. Test-only.
package wiretest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/npumon/npumon/allocator/snapshot"
)

// ShortSock returns a Unix socket path in a fresh temporary directory that
// is removed when tb ends. The directory is short (sun_path holds about 108
// bytes; tb.TempDir's, named after the test, can exceed that).
func ShortSock(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "npm")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "p.sock")
}

// LiveSlots is how many 512 KiB blocks fit in Live's segment.
const LiveSlots = 256

// Live makes the entries e2e's BenchmarkLiveAttach publishes: one
// LiveSlots MiB segment (Segment), then alloc / free_requested /
// free_completed of 512 KiB blocks in slots an LCG picks (Next). The zero
// value is not ready: use NewLive.
type Live struct {
	k     uint32
	state [LiveSlots]uint8 // 0 free, 1 allocated, 2 free requested
}

// liveSeg is the segment's address.
const liveSeg = uint64(0x7f0000000000)

// NewLive starts the pattern.
func NewLive() *Live { return &Live{k: 1} }

// Segment is the pattern's first entry: the segment the blocks live in.
func (l *Live) Segment(timeUS int64) snapshot.TraceEntry {
	return snapshot.TraceEntry{Action: snapshot.ActionSegmentAlloc, Addr: liveSeg, Size: LiveSlots << 20, TimeUS: timeUS}
}

// Next is the pattern's next block entry, at timeUS.
func (l *Live) Next(timeUS int64) snapshot.TraceEntry {
	l.k = l.k*1664525 + 1013904223
	s := int(l.k>>8) % LiveSlots
	e := snapshot.TraceEntry{Addr: liveSeg + uint64(s)<<20, Size: 512 << 10, Stream: 1, TimeUS: timeUS, Frames: snapshot.StackID(1 + s%7)}
	switch l.state[s] {
	case 0:
		e.Action, l.state[s] = snapshot.ActionAlloc, 1
	case 1:
		e.Action, l.state[s] = snapshot.ActionFreeRequested, 2
	default:
		e.Action, l.state[s] = snapshot.ActionFreeCompleted, 0
	}
	return e
}
