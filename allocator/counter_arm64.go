package allocator

// cycleCounter reads the generic timer's virtual count, CNTVCT_EL0 — what
// PyTorch's ApproximateClock reads on aarch64 (Kunpeng hosts of Ascend
// NPUs among them). Like RDTSC it is not ordered against neighbouring
// instructions, which event timestamps do not need.
//
//go:noescape
func cycleCounter() int64

// counterReliable reports whether Linux keeps time with the generic timer
// itself. The architecture makes the counter system-wide and of constant
// frequency; where an erratum forbids direct reads the kernel traps and
// emulates them, so a read is then slow but still right.
func counterReliable() bool { return kernelClocksource() == "arch_sys_counter" }
