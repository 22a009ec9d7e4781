// Package explain answers the three questions a memory dump is opened
// for (docs/explain.md): which code holds the memory at a moment (live
// allocations grouped by call site, stack, op, stream or size class),
// what grew between two moments (per-group differences and leak
// suspects across training steps), and why an allocation failed (the
// figures of each oom entry, a fragmentation or shortage verdict, the
// failing request's op and stack, the top holders and what the what-if
// engine says about other allocator settings).
//
// Live allocations follow docs/timeline.md: the allocations live before
// the trace (Timeline.Start) plus every alloc not yet completely freed;
// their sizes are the trace's (requested bytes), so the bytes of all
// groups add up to the active series at that moment.
package explain
