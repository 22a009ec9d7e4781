package allocator

// cycleCounter reads the time-stamp counter with RDTSC (no serialisation:
// ordering against other instructions does not matter for event
// timestamps, and Snapshot keeps a trace's times non-decreasing).
//
//go:noescape
func cycleCounter() int64

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// counterReliable reports whether the TSC is invariant (CPUID 0x80000007
// EDX[8]) and either the kernel itself keeps time with it (clocksource
// tsc: Linux checked cross-CPU synchronisation before choosing it) or the
// kernel keeps time with kvm-clock — the TSC scaled by the hypervisor's
// parameters, which the guest reads with RDTSC on any vCPU — and the TSC
// is found on one line with the monotonic clock on every CPU this process
// may use (counterInSync). A guest booted with tsc=unstable, as some
// microVMs are, gets kvm-clock although its TSC is fit for timestamps;
// the runtime's clock there costs 2–3 RDTSCs (BENCHMARKS.md).
func counterReliable() bool {
	if maxExt, _, _, _ := cpuid(0x80000000, 0); maxExt < 0x80000007 {
		return false
	}
	if _, _, _, edx := cpuid(0x80000007, 0); edx&(1<<8) == 0 {
		return false
	}
	switch kernelClocksource() {
	case "tsc":
		return true
	case "kvm-clock":
		return counterAgreesAcrossCPUs(cycleCounter)
	}
	return false
}
