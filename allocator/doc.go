// Package allocator is npumon's caching device allocator: a rule-for-rule
// re-implementation of torch_npu's NPUCachingAllocator (with a CUDA-flavoured
// mode) on the simulated acl runtime, whose trace entries carry epoch time.
//
// It also owns the snapshot data model (Snapshot, Segment, Block, TraceEntry)
// shared by file readers and the live path. The algorithm follows
// shared/reference/allocator-semantics.md §1–§6; docs/allocator.md summarises
// it together with the tracker contract and the clock.
package allocator
