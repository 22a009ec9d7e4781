package replay

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/npumon/npumon/internal/testutil/fixture"
)

// MaxFileSize refuses before reading; MaxMemory stops a decode that would
// need more, with an error instead of the allocation.
func TestDecodeLimits(t *testing.T) {
	p := fixture.Path(t, "snapshots/cuda-2026-assignment2-memory_snapshot.pickle")
	if _, err := DecodeFile(p, Options{MaxFileSize: 1000}); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("MaxFileSize: %v", err)
	}
	if _, err := DecodeFile(p, Options{MaxMemory: 1 << 20}); err == nil || !strings.Contains(err.Error(), "memory limit") {
		t.Fatalf("MaxMemory: %v", err)
	}
	if _, err := DecodeFile(p, Options{MaxFileSize: 1 << 30, MaxMemory: 1 << 30}); err != nil {
		t.Fatalf("within limits: %v", err)
	}
}

// memoizeFlood is a protocol-4 pickle of one empty dict memoized n times
// (PROTO 4, EMPTY_DICT, n × MEMOIZE, STOP), written byte by byte: each
// one-byte opcode makes a memo row, the shape the budget once undercounted
// (a 30 MB file reached 4.19 GB under a 1,437 MiB budget).
func memoizeFlood(n int) []byte {
	b := make([]byte, 0, n+4)
	b = append(b, 0x80, 4, '}')
	for range n {
		b = append(b, 0x94)
	}
	return append(b, '.')
}

// The budget charges what the memo really allocates: everything the
// decode allocates (runtime TotalAlloc, garbage included) stays within the
// budget named in the error, plus the input and one page.
func TestMemoBudgetMatchesHeap(t *testing.T) {
	in := memoizeFlood(3_000_000)
	for _, limit := range []int64{32 << 20, 100 << 20} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := Decode(bytes.NewReader(in), int64(len(in)), Options{MaxMemory: limit})
		runtime.ReadMemStats(&after)
		want := fmt.Sprintf("more than the %d MiB memory limit", limit>>20)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("limit %d MiB: %v", limit>>20, err)
		}
		got := int64(after.TotalAlloc - before.TotalAlloc)
		slack := int64(len(in)) + 4<<20 // the input's copy, the last page, the decoder's own state
		if got > limit+slack {
			t.Errorf("limit %d MiB: the decode allocated %d MiB", limit>>20, got>>20)
		}
		t.Logf("limit %d MiB: allocated %d MiB", limit>>20, got>>20)
	}
}
