package allocator

import (
	"os"
	"runtime"
	"strings"
)

// rdtsc reads the time-stamp counter (no serialisation: ordering against
// other instructions does not matter for event timestamps).
//
//go:noescape
func rdtsc() int64

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// tscReliable reports whether the TSC is invariant (CPUID 0x80000007
// EDX[8]) and, on Linux, the kernel itself trusts it as clocksource — the
// kernel checks cross-CPU synchronisation before it does.
func tscReliable() bool {
	if maxExt, _, _, _ := cpuid(0x80000000, 0); maxExt < 0x80000007 {
		return false
	}
	if _, _, _, edx := cpuid(0x80000007, 0); edx&(1<<8) == 0 {
		return false
	}
	if runtime.GOOS != "linux" {
		return false
	}
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}
