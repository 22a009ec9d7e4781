package replay

import (
	"strings"
	"testing"

	"github.com/npumon/npumon/testdata/fixture"
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
