package allocator

// cycleCounter reads the time-stamp counter with RDTSC (no serialisation:
// ordering against other instructions does not matter for event
// timestamps, and Snapshot keeps a trace's times non-decreasing).
//
//go:noescape
func cycleCounter() int64

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// counterReliable reports whether the TSC is invariant (CPUID 0x80000007
// EDX[8]) and the kernel itself trusts it as clocksource — Linux checks
// cross-CPU synchronisation before it does.
func counterReliable() bool {
	if maxExt, _, _, _ := cpuid(0x80000000, 0); maxExt < 0x80000007 {
		return false
	}
	if _, _, _, edx := cpuid(0x80000007, 0); edx&(1<<8) == 0 {
		return false
	}
	return kernelClocksource() == "tsc"
}
