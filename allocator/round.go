package allocator

import "math/bits"

// Size constants (docs/reference/allocator-semantics.md §1).
const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30

	kMinBlockSize     = 512
	kSmallSize        = 1 * MiB
	kSmallBuffer      = 2 * MiB
	kLargeBuffer      = 20 * MiB
	kMinLargeAlloc    = 10 * MiB
	kRoundLarge       = 2 * MiB
	kExtraLargeBuffer = 1 * GiB
	kNPUPad           = 32
	oneExaBytes       = int64(1) << 60
)

// Note [The NPU 32-byte pad]
// torch_npu adds 32 bytes to every request before rounding (except on
// Ascend950 with CANN 9.1 or newer). It allocates segments with
// aclrtMallocAlign32, which, unlike aclrtMalloc, adds no 32 bytes of its
// own, and the pad restores them. The pad is why an exact 1 MiB tensor is a
// large-pool allocation in a 20 MiB segment on NPU (1 MiB + 32 rounds to
// 1 049 088 > kSmallSize) but a small-pool one on CUDA, so replaying a trace
// with the wrong flavour moves tensors between pools.

// roundSize is round_size: the NPU pad (Note [The NPU 32-byte pad]), the
// 512-byte minimum and roundup_power2_divisions.
func (c *Config) roundSize(size int64) int64 {
	if c.Pad32 {
		size += kNPUPad
	}
	if size < kMinBlockSize {
		return kMinBlockSize
	}
	if d := c.divisions(size); d > 1 && size > kMinBlockSize*d {
		return nextDivision(size, d)
	}
	return roundUp(size, kMinBlockSize)
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
	return roundUp(size, step)
}

// allocationSize is get_allocation_size: the segment size requested from
// the device for a rounded size.
func (c *Config) allocationSize(size int64) int64 {
	switch {
	case size <= kSmallSize:
		return kSmallBuffer
	case c.PageSize1G:
		return roundUp(size, kExtraLargeBuffer)
	case size < kMinLargeAlloc:
		return c.LargeSegmentSize
	default:
		return roundUp(size, kRoundLarge)
	}
}

// expandablePageSize is the handle granularity of an expandable segment.
func (c *Config) expandablePageSize(small bool) int64 {
	switch {
	case small:
		return kSmallBuffer
	case c.PageSize1G:
		return kExtraLargeBuffer
	default:
		return c.LargeSegmentSize
	}
}

func roundUp(v, m int64) int64 { return (v + m - 1) / m * m }

// RoundSize is round_size: the block size the allocator hands out for a
// request of size bytes before any unsplit remainder (torch_npu's 32-byte
// pad when Pad32, the 512-byte minimum and roundup_power2_divisions). A
// block is never smaller; it is larger only when the free block it came
// from was not split.
func (c *Config) RoundSize(size int64) int64 { return c.roundSize(size) }
