// Package acl simulates the Ascend ACL runtime (aclrt*) closely enough for a
// caching allocator to run on it: devices with a fixed HBM capacity and a real
// free-space map, aclrtMalloc/aclrtFree with the driver's rounding, padding and
// page placement, streams and events that complete on an injectable clock,
// the virtual-memory calls used by expandable segments, ACL error codes as
// typed errors, and fault injection for the layers above.
//
// Memory model. Each device owns one address range of usable HBM starting at
// HBMBase. Malloc, MallocAlign32 and MallocPhysical all carve from the same
// sorted list of free ranges (first fit, lowest address wins, neighbours
// coalesce on free), so the same call sequence always yields the same
// addresses and device-level fragmentation is real: a request fails with
// ErrMemoryAllocation when no single range fits even if total free would.
//
// Placement follows the CANN documentation of aclrtMalloc and
// aclrtMemMallocPolicy:
//   - Malloc rounds the size up to 32 B and adds 32 B of padding; MallocAlign32
//     only rounds to 32 B (torch_npu allocates its segments with it).
//   - Normal pages: the start is 64-B aligned and the footprint is the rounded
//     (and padded) size.
//   - Huge pages (HugeOnly always; HugeFirst when the rounded size exceeds
//     1 MiB): the start is 2 MiB aligned and the footprint is rounded up to
//     whole 2 MiB pages. HugeFirst falls back to normal pages when no huge
//     placement fits; HugeOnly and NormalOnly do not fall back.
//   - Huge1GOnly: 1 GiB aligned, footprint rounded up to 1 GiB, no padding.
//
// A consequence worth knowing: Malloc(2 MiB, HugeFirst) needs 2 MiB + 32 B and
// therefore occupies two huge pages (4 MiB), whereas MallocAlign32(2 MiB,
// HugeFirst) occupies exactly one.
//
// Time. Work launched on a stream has a duration; its completion time is fixed
// when it is enqueued (start = max(now, end of previous work, awaited
// events)), so events and synchronisation are exact on a ManualClock and
// real on RealClock. Synchronize* calls Clock.SleepUntil, which jumps a
// ManualClock forward.
//
// All methods are safe for concurrent use; each device has its own mutex.
package acl
