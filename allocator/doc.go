// Package allocator is npumon's caching device allocator: a rule-for-rule
// re-implementation of torch_npu's NPUCachingAllocator (with a CUDA-flavoured
// mode) on the simulated acl runtime, whose trace entries carry epoch time.
//
// The snapshot data model it produces (Snapshot, Segment, Block, TraceEntry)
// is the leaf package allocator/snapshot, and its settings (parsing,
// round_size) are allocator/config, so readers use both without the
// algorithm. The rules it follows are in
// docs/reference/allocator-semantics.md (sizes §1, blocks and pools §2,
// expandable segments §3, settings §4, statistics §5, history and clock §6,
// flavours §7); docs/allocator.md describes the API, the tracker contract and
// the clock.
package allocator
