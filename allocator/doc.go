// Package allocator is npumon's caching device allocator: a rule-for-rule
// re-implementation of torch_npu's NPUCachingAllocator (with a CUDA-flavoured
// mode) on the simulated acl runtime, whose trace entries carry epoch time.
//
// It also owns the snapshot data model (Snapshot, Segment, Block, TraceEntry)
// shared by file readers and the live path. The rules it follows are in
// docs/reference/allocator-semantics.md (sizes §1, blocks and pools §2,
// expandable segments §3, settings §4, statistics §5, history and clock §6,
// flavours §7); docs/allocator.md describes the API, the tracker contract and
// the clock.
package allocator
