package config

import "math/bits"

// Size constants (docs/reference/allocator-semantics.md §1).
const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30

	// MinBlockSize is MinBlockSize: every block is a multiple of it.
	MinBlockSize = 512
	// SmallSize is SmallSize: requests up to it go to the small pool.
	SmallSize = 1 * MiB
	// SmallBuffer is SmallBuffer: the size of a small-pool segment.
	SmallBuffer       = 2 * MiB
	kLargeBuffer      = 20 * MiB
	kMinLargeAlloc    = 10 * MiB
	kRoundLarge       = 2 * MiB
	kExtraLargeBuffer = 1 * GiB
	kNPUPad           = 32
	// OneExaBytes is torch's sanity bound on a single request.
	OneExaBytes = int64(1) << 60
)

// Note [The NPU 32-byte pad]
// torch_npu adds 32 bytes to every request before rounding (except on
// Ascend950 with CANN 9.1 or newer). It allocates segments with
// aclrtMallocAlign32, which, unlike aclrtMalloc, adds no 32 bytes of its
// own, and the pad restores them. The pad is why an exact 1 MiB tensor is a
// large-pool allocation in a 20 MiB segment on NPU (1 MiB + 32 rounds to
// 1 049 088 > SmallSize) but a small-pool one on CUDA, so replaying a trace
// with the wrong flavour moves tensors between pools.

// roundSize is round_size: the NPU pad (Note [The NPU 32-byte pad]), the
// 512-byte minimum and roundup_power2_divisions.
func (c *Config) roundSize(size int64) int64 {
	if c.Pad32 {
		size += kNPUPad
	}
	if size < MinBlockSize {
		return MinBlockSize
	}
	if d := c.divisions(size); d > 1 && size > MinBlockSize*d {
		return nextDivision(size, d)
	}
	return RoundUp(size, MinBlockSize)
}

// divisions looks up the bucket of size: clamp(floor(log2 size) − 20, 0, 15).
func (c *Config) divisions(size int64) int64 {
	idx := max(bits.Len64(uint64(size))-1-20, 0)
	return c.RoundupDivisions[min(idx, len(c.RoundupDivisions)-1)]
}

// nextDivision is roundup_power2_next_division.
func nextDivision(size, d int64) int64 {
	if isPow2(size) {
		return size
	}
	floor2 := int64(1) << (bits.Len64(uint64(size)) - 1)
	step := floor2 >> (bits.Len64(uint64(d)) - 1)
	if step == 0 {
		return floor2 << 1
	}
	return RoundUp(size, step)
}

// AllocationSize is get_allocation_size: the segment size requested from
// the device for a rounded size.
func (c *Config) AllocationSize(size int64) int64 {
	switch {
	case size <= SmallSize:
		return SmallBuffer
	case c.PageSize1G:
		return RoundUp(size, kExtraLargeBuffer)
	case size < kMinLargeAlloc:
		return c.LargeSegmentSize
	default:
		return RoundUp(size, kRoundLarge)
	}
}

// ExpandablePageSize is the handle granularity of an expandable segment.
func (c *Config) ExpandablePageSize(small bool) int64 {
	switch {
	case small:
		return SmallBuffer
	case c.PageSize1G:
		return kExtraLargeBuffer
	default:
		return c.LargeSegmentSize
	}
}

// RoundUp rounds v up to a multiple of m.
func RoundUp(v, m int64) int64 { return (v + m - 1) / m * m }

// RoundSize is round_size: the block size the allocator hands out for a
// request of size bytes before any unsplit remainder (torch_npu's 32-byte
// pad when Pad32, the 512-byte minimum and roundup_power2_divisions). A
// block is never smaller; it is larger only when the free block it came
// from was not split.
func (c *Config) RoundSize(size int64) int64 { return c.roundSize(size) }
