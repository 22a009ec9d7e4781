// Package workload is npumon's demo and simulation load: a deterministic,
// seeded training-like job on the simulated acl device, allocating through the
// instrumented caching allocator and recording ops with the profiler, the way
// an instrumented torch_npu process would. It drives `npumon demo` and
// `npumon sim`, and the end-to-end tests.
//
// A step is a forward pass over N transformer layers (activations of varied,
// realistic sizes plus temporaries), a backward pass (gradients, activations
// released, gradient buckets all-reduced on a communication stream with
// RecordStream), and an optimizer step (Adam states allocated on the first
// step). Scenarios add a pattern on top: steady, fragmentation, leak, oom.
//
// Time is simulated: the acl runtime, the allocator and the profiler share one
// manual clock that the workload advances by each op's duration, so a run is
// the same for the same seed. Paced runs sleep so that the simulated clock
// follows the wall clock (live demos); unpaced runs go as fast as the CPU
// allows (tests).
package workload
